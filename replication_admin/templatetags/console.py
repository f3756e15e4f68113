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
    label, css = {None: ("not checked", ""), True: ("reachable", "ok"), False: ("failing", "bad")}[ok]
    return format_html('<span class="badge {}">{}</span>', css, label)


@register.filter
def keytext(key: dict) -> str:
    """{'OrderID': '10248', 'ProductID': '11'} -> 'OrderID=10248, ProductID=11'."""
    return ", ".join(f"{name}={value}" for name, value in key.items())
