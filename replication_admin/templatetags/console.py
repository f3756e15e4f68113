from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils import timezone
from django.utils.html import format_html

register = template.Library()


@register.filter
def when(value: datetime | None) -> str:
    """A time in the console's time zone, with the UTC value on hover."""
    if not value:
        return "—"
    local = timezone.localtime(value)
    utc = value.astimezone(UTC)
    return format_html(
        '<time datetime="{}" title="{} UTC">{}</time>',
        utc.isoformat(),
        utc.strftime("%Y-%m-%d %H:%M:%S"),
        local.strftime("%Y-%m-%d %H:%M:%S"),
    )


@register.filter
def seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min"


@register.filter
def status_badge(ok: bool | None) -> str:
    if ok is None:
        return format_html('<span class="badge">not checked</span>')
    if ok:
        return format_html('<span class="badge ok">reachable</span>')
    return format_html('<span class="badge bad">failing</span>')
