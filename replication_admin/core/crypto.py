"""Server passwords at rest: Fernet tokens under keys from the environment (REPLADMIN_FERNET_KEYS)."""

from __future__ import annotations

from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class SecretError(Exception):
    """A stored secret cannot be decrypted with the configured keys."""


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key.encode()) for key in keys])


def encrypt(plain: str) -> str:
    if plain == "":
        return ""
    return _fernet(tuple(settings.FERNET_KEYS)).encrypt(plain.encode()).decode()


def decrypt(token: str) -> str:
    if token == "":
        return ""
    try:
        return _fernet(tuple(settings.FERNET_KEYS)).decrypt(token.encode()).decode()
    except InvalidToken:
        raise SecretError(
            "the stored password cannot be decrypted with REPLADMIN_FERNET_KEYS (was the key changed?)"
        ) from None


def rotate(token: str) -> str:
    """Re-encrypt a token under the first (newest) key."""
    if token == "":
        return ""
    return _fernet(tuple(settings.FERNET_KEYS)).rotate(token.encode()).decode()


def new_key() -> str:
    return Fernet.generate_key().decode()
