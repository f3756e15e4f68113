"""Request middleware of the console."""

from __future__ import annotations

from urllib.parse import unquote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.utils import timezone


class BrowserTimeZoneMiddleware:
    """Show times in the user's time zone: the browser reports it in the `tz` cookie
    (static/js/timezone.js); an unknown or missing zone leaves the console's TIME_ZONE."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        zone = unquote(request.COOKIES.get("tz", ""))[:64]
        if zone:
            try:
                timezone.activate(ZoneInfo(zone))
            except (ZoneInfoNotFoundError, ValueError):
                timezone.deactivate()
        else:
            timezone.deactivate()
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
