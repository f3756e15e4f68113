"""Users with and without the console's permissions, signed in (fixtures registered in tests/conftest.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client


def make_user(username: str, *perms: str) -> User:
    user = User.objects.create_user(username, password="pw-for-tests-only")
    for perm in perms:
        user.user_permissions.add(Permission.objects.get(codename=perm, content_type__app_label="replication_admin"))
    return User.objects.get(pk=user.pk)


@pytest.fixture
def editor_client(db) -> Client:
    client = Client()
    client.force_login(make_user("editor", "edit", "operate"))
    return client


@pytest.fixture
def viewer_client(db) -> Client:
    client = Client()
    client.force_login(make_user("viewer"))
    return client


@pytest.fixture
def operator_client(db) -> Client:
    client = Client()
    client.force_login(make_user("operator", "operate"))
    return client
