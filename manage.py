#!/usr/bin/env python
"""Command-line entry point of replication_admin."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "replication_admin.settings")
    # After the settings module is named; `manage.py help` then describes the product's own commands.
    from replication_admin.management.help_text import Utility  # noqa: PLC0415

    Utility(sys.argv).execute()


if __name__ == "__main__":
    main()
