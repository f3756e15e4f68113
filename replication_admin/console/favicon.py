"""/favicon.ico: the console's icon (static/favicon.svg), for the browsers and tools that ask for it at the root
whatever the page's <link rel=icon> says, so that no request of theirs is a 404."""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth.decorators import login_not_required
from django.contrib.staticfiles import finders
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET

ICON = "favicon.svg"


@login_not_required  # the login page asks for it too
@require_GET
@cache_control(public=True, max_age=86400)
def favicon(request: HttpRequest) -> HttpResponse:
    found = finders.find(ICON)
    if not found:
        raise Http404(ICON)
    return HttpResponse(Path(str(found)).read_bytes(), content_type="image/svg+xml")
