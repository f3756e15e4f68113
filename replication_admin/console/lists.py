"""The publications and subscriptions pages: every kind of replication on one page, each kind in its own
section with its own sort, filter and page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from replication_admin.bidir import selectors as bidir_selectors
from replication_admin.transactional import selectors as trx_selectors


@require_GET
def publication_list(request: HttpRequest) -> HttpResponse:
    context = {
        **bidir_selectors.publication_list_context(request),
        **trx_selectors.publication_list_context(request),
    }
    return render(request, "replication_admin/console/publications.html", context)


@require_GET
def subscription_list(request: HttpRequest) -> HttpResponse:
    context = {
        **bidir_selectors.subscription_list_context(request),
        **trx_selectors.subscription_list_context(request),
    }
    return render(request, "replication_admin/console/subscriptions.html", context)
