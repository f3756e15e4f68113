"""Production settings from the environment pass Django's deployment checklist."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parents[2]


def run_manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {
        k: v for k, v in os.environ.items() if not k.startswith("REPLADMIN_") and k != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    environ.update(env)
    argv = [sys.executable, "manage.py", *args]
    return subprocess.run(argv, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120)


PRODUCTION = {
    "REPLADMIN_DEBUG": "0",
    "REPLADMIN_VAR_DIR": "/nonexistent-var-dir",  # no dev.env: everything comes from the environment
    "REPLADMIN_SECRET_KEY": secrets.token_urlsafe(64),
    "REPLADMIN_FERNET_KEYS": Fernet.generate_key().decode(),
    "REPLADMIN_ALLOWED_HOSTS": "replication.example.com",
}


def test_check_deploy_passes_with_production_settings_from_the_environment():
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_without_keys_in_the_environment_the_console_refuses_to_start():
    env = {k: v for k, v in PRODUCTION.items() if k != "REPLADMIN_FERNET_KEYS"}
    result = run_manage("check", **env)
    assert result.returncode != 0
    assert "REPLADMIN_FERNET_KEYS is not set" in result.stderr


def test_debug_settings_fail_the_deployment_checklist():
    debug = {**PRODUCTION, "REPLADMIN_DEBUG": "1"}
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", **debug)
    assert result.returncode != 0 and "DEBUG" in result.stdout + result.stderr
