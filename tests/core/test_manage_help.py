"""`manage.py help` gives each of the product's commands a line saying what it does."""

from __future__ import annotations

import subprocess
import sys

from django.core.management import get_commands

from replication_admin.management.help_text import first_line
from tests.conftest import ROOT


def test_manage_help_describes_every_product_command_in_one_line():
    out = subprocess.run([sys.executable, str(ROOT / "manage.py"), "help"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    section = out.split("[replication_admin]", 1)[1].split("\n\n", 1)[0].strip().splitlines()
    ours = sorted(name for name, app in get_commands().items() if app == "replication_admin")
    assert [line.split()[0] for line in section] == ours
    described = {line.split()[0]: line.split(None, 1)[1] for line in section}
    assert described["replfollow"].startswith("Serve every transactional subscription in the IN SYNC state")
    assert all(len(line) <= 4 + 20 + 2 + 100 for line in section)
    assert "replsql" in out and "migrate" in out  # Django's own commands are still listed


def test_a_description_stops_at_its_first_sentence_and_a_hundred_characters():
    assert first_line("Test servers. Then more.") == "Test servers"
    assert first_line("  Run\n  statements; then more") == "Run statements"
    assert len(first_line("x" * 300)) == 100
