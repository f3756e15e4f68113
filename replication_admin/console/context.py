from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

NAVIGATION = [
    ("dashboard", "Dashboard"),
    ("setup", "Set up"),
    ("servers", "Servers"),
    ("snapshots", "Snapshots"),
    ("publications", "Publications"),
    ("subscriptions", "Subscriptions"),
    ("conflicts", "Conflicts"),
    ("scheduler", "Scheduler"),
    ("statements", "Statements"),
    ("jobs", "Jobs"),
    ("alerts", "Alerts"),
    ("topology", "Topology"),
    ("health", "Health"),
    ("audit", "Audit"),
]


def console(request: HttpRequest) -> dict:
    match = getattr(request, "resolver_match", None)
    section = (match.url_name or "").split("-")[0] if match else ""
    return {"navigation": NAVIGATION, "section": section, "debug_mode": settings.DEBUG}
