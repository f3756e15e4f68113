"""Read queries of the conflict inbox for pages: conflicts per day."""

from __future__ import annotations

from datetime import date

from django.db.models import QuerySet

from replication_admin.core.web import (
    per_day_counts,
    stacked_bars,
)
from replication_admin.models import (
    ConflictBackup,
)
from replication_admin.models.catalog import CR_TYPES

TYPE_COLOURS = {"I": "#1565c0", "U": "#b26a00", "D": "#c62828"}


def conflicts_per_day_figure(
    conflicts: QuerySet[ConflictBackup], first: date | None = None, last: date | None = None
) -> dict:
    """Plotly figure (as a dict) of the conflicts per day, one stacked bar trace per conflict type, over the days
    from `first` to `last` (by default those with conflicts)."""
    series: dict[str, dict[str, int]] = {}
    for day, conflict_type, n in per_day_counts(conflicts, "created_at", "conflict_type"):
        series.setdefault(conflict_type, {})[day.isoformat()] = n
    labels = dict(CR_TYPES)
    traces = [
        {
            "type": "bar",
            "name": f"{labels[code]} ({code})",
            "x": list(series[code]),
            "y": list(series[code].values()),
            "marker": {"color": TYPE_COLOURS[code]},
        }
        for code in labels
        if code in series
    ]
    return stacked_bars(traces, first, last)
