"""KEY=VALUE files for the environment, read without Django: the settings and gunicorn's configuration
(scripts/gunicorn.conf.py) both take their values from the file REPLADMIN_ENV_FILE names, so a setting put there
reaches every process of the console, the web server's bind address included."""

from __future__ import annotations

import os
from pathlib import Path


def load_env_file(path: Path) -> None:
    """Fill os.environ from KEY=VALUE lines, without overriding what is already set."""
    if not path.is_file():
        return
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        os.environ.setdefault(key.strip(), value.strip().strip("'\""))


def named_env_file() -> Path | None:
    """The file REPLADMIN_ENV_FILE names, if it names one (an error if it names no file: a typo must not pass)."""
    name = os.environ.get("REPLADMIN_ENV_FILE", "").strip()
    if not name:
        return None
    if not Path(name).is_file():
        raise FileNotFoundError(f"REPLADMIN_ENV_FILE names {name}, which is not a file")
    return Path(name)
