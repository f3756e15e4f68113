"""Loaded by pytest before Django (`-p tests.dev_env` in pyproject.toml): the test suite runs with the development
settings of var/dev.env unless REPLADMIN_ENV_FILE already names another file. Child processes inherit it."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("REPLADMIN_ENV_FILE", str(Path(__file__).resolve().parent.parent / "var" / "dev.env"))
