"""Values in plain words for people: a job's result, an audit row's detail. A dict reads "rows 4, seconds 1.2" and
a list of them "job 13 succeeded; job 14 failed", never Python's {'rows': 4} or [{'job': 13, …}]."""

from __future__ import annotations

from typing import Any


def plain(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{key.replace('_', ' ')} {plain(item)}".strip() for key, item in value.items())
    if isinstance(value, list | tuple | set):
        parts = [plain(item) for item in value]
        return "; ".join(parts) if any(isinstance(item, dict) for item in value) else ", ".join(parts)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def key_label(key: dict[str, Any]) -> str:
    """A backup's primary key for people: {'OrderID': 10248, 'ProductID': 11} -> 'OrderID=10248, ProductID=11'."""
    return ", ".join(f"{name}={value}" for name, value in key.items())
