"""The permissions are named once (core/permissions.py) and views check them one way (core.web.requires)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PRODUCT = ROOT / "replication_admin"
NAMED = re.compile(r"[\"'](replication_admin\.(edit|operate)|auth\.change_user)[\"']")


def sources(pattern: str, under: Path = PRODUCT) -> list[Path]:
    return [p for p in under.rglob(pattern) if "migrations" not in p.parts]


def test_the_permissions_are_written_out_only_in_core_permissions():
    written = [str(p.relative_to(ROOT)) for p in sources("*.py") if NAMED.search(p.read_text())]
    assert written == ["replication_admin/core/permissions.py"]


def test_no_view_checks_a_permission_itself_and_no_page_asks_django_perms():
    views = [p for p in sources("*.py") if p.name.endswith("views.py") or p.parent.name == "console"]
    asking = [str(p.relative_to(ROOT)) for p in views if ".has_perm(" in p.read_text()]
    assert asking == []
    pages = [str(p.relative_to(ROOT)) for p in sources("*.html", ROOT / "templates") if "perms." in p.read_text()]
    assert pages == []
