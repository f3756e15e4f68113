"""`manage.py help` with a line on each of replication_admin's own commands: Django lists commands by name only,
and a DBA looking for "the one that follows subscriptions" should not have to open each."""

from __future__ import annotations

from django.core.management import ManagementUtility, get_commands, load_command_class

APP = "replication_admin"


LINE = 100  # characters of a command's description in the listing


def first_line(text: str) -> str:
    """A command's help, to its first sentence, at most LINE characters."""
    sentence = " ".join(text.split()).split(". ")[0].split("; ")[0].rstrip(".")
    return sentence if len(sentence) <= LINE else sentence[: LINE - 1].rstrip() + "…"


class Utility(ManagementUtility):
    def main_help_text(self, commands_only: bool = False) -> str:
        text = super().main_help_text(commands_only)
        if commands_only:
            return text
        ours = sorted(name for name, app in get_commands().items() if app == APP)
        width = max((len(n) for n in ours), default=0)
        described = {name: first_line(load_command_class(APP, name).help) for name in ours}
        lines, section = [], ""
        for line in text.splitlines():
            if line.startswith("[") and line.endswith("]"):
                section = line
            name = line.strip()
            if section == f"[{APP}]" and name in described and line.startswith("    "):
                line = f"    {name.ljust(width)}  {described[name]}"
            lines.append(line)
        return "\n".join(lines)
