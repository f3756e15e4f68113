"""Read queries of the conflict inbox for pages: conflicts per day, and the dashboard's recent conflicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

from django.db.models import Count, Q, QuerySet, Value
from django.db.models.functions import Concat
from django.utils import timezone

from replication_admin.core.web import (
    per_day_counts,
    stacked_bars,
)
from replication_admin.models import (
    ConflictBackup,
)
from replication_admin.models.catalog import CR_TYPES

# A held conflict nobody has picked a version for: it waits for a person (the inbox's "held" status, the statistics'
# "held now", and what the retention never purges).
WAITING_FOR_A_PERSON = Q(decision=ConflictBackup.HELD, chosen__isnull=True)

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


RECENT_DAYS = 7  # "this week" on the dashboard: today and the six days before it
RECENT_ITEMS_SHOWN = 3


@dataclass(frozen=True)
class RecentConflicts:
    """Conflicts decided today and in the last RECENT_DAYS days (in the console's time zone), and the publications
    with the most of them this week (item, today, week), most first."""

    today: int
    week: int
    week_since: date
    by_item: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def items_shown(self) -> list[tuple[str, int, int]]:
        return self.by_item[:RECENT_ITEMS_SHOWN]


def recent_conflicts(now: datetime | None = None) -> RecentConflicts:
    """One grouped query: per publication, its conflicts today and this week."""
    today = timezone.localdate(now)
    week_since = today - timedelta(days=RECENT_DAYS - 1)
    midnight = timezone.make_aware(datetime.combine(today, time.min))
    week_start = timezone.make_aware(datetime.combine(week_since, time.min))
    rows = (
        ConflictBackup.objects.filter(created_at__gte=week_start)
        .order_by()
        .values("item")
        .annotate(week=Count("id"), today=Count("id", filter=Q(created_at__gte=midnight)))
    )
    by_item = sorted(((r["item"], r["today"], r["week"]) for r in rows), key=lambda r: (-r[2], -r[1], r[0]))
    return RecentConflicts(
        today=sum(r[1] for r in by_item), week=sum(r[2] for r in by_item), week_since=week_since, by_item=by_item
    )


STATS_DAYS = 30  # the statistics page's window and chart


@dataclass(frozen=True)
class SubscriptionConflicts:
    """One subscription's conflicts of one type: today, in the last RECENT_DAYS and STATS_DAYS days, all the
    backups kept, and how many wait for a person now."""

    item: str
    source: str
    kind: str
    conflict_type: str
    today: int
    week: int
    month: int
    kept: int
    held: int

    @property
    def type_label(self) -> str:
        return dict(CR_TYPES).get(self.conflict_type, self.conflict_type)


def conflict_statistics(now: datetime | None = None) -> list[SubscriptionConflicts]:
    """Per subscription (publication item and the subscriber it came from) and conflict type, one grouped query;
    the most conflicted this month first."""
    today = timezone.localdate(now)
    since = {
        name: timezone.make_aware(datetime.combine(today - timedelta(days=days - 1), time.min))
        for name, days in (("today", 1), ("week", RECENT_DAYS), ("month", STATS_DAYS))
    }
    rows = (
        ConflictBackup.objects.order_by()
        .values("item", "source", "kind", "conflict_type")
        .annotate(
            kept=Count("id"),
            held=Count("id", filter=WAITING_FOR_A_PERSON),
            **{name: Count("id", filter=Q(created_at__gte=at)) for name, at in since.items()},
        )
    )
    stats = [SubscriptionConflicts(r["item"], r["source"], r["kind"], r["conflict_type"], r["today"], r["week"],
                                   r["month"], r["kept"], r["held"]) for r in rows]  # fmt: skip
    return sorted(stats, key=lambda s: (-s.month, -s.kept, s.item, s.source, s.conflict_type))


def subscription_label(item: str, source: str) -> str:
    return f"{item} ← {source}"


def conflicts_by_subscription_figure(first: date, last: date) -> dict:
    """Plotly figure of the conflicts per day from `first` to `last`, one stacked trace per subscription."""
    start = timezone.make_aware(datetime.combine(first, time.min))
    series: dict[str, dict[str, int]] = {}
    for day, (item, source), n in _per_day_by_subscription(ConflictBackup.objects.filter(created_at__gte=start)):
        series.setdefault(subscription_label(item, source), {})[day.isoformat()] = n
    traces = [
        {"type": "bar", "name": name, "x": list(points), "y": list(points.values())}
        for name, points in sorted(series.items())
    ]
    return stacked_bars(traces, first, last)


SEPARATOR = "\x1f"  # between item and source in one grouped value: in neither name (they are identifiers)


def _per_day_by_subscription(conflicts: QuerySet[ConflictBackup]) -> list[tuple[date, tuple[str, str], int]]:
    """(day, (item, source), count): per_day_counts by one field, on the pair joined into one value."""
    joined = conflicts.annotate(subscription=Concat("item", Value(SEPARATOR), "source"))
    counted = per_day_counts(joined, "created_at", "subscription")
    return [(day, (key.split(SEPARATOR, 1)[0], key.split(SEPARATOR, 1)[1]), n) for day, key, n in counted]
