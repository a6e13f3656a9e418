"""One-click unsubscribe (RFC 8058): ``/u/{token}/``, no authentication.

``GET`` only shows a page with a confirm button (mail scanners and link previewers fetch
with GET: they must change nothing). ``POST`` opts the token's recipient out of its
scope - from the mail client's one-click request (body ``List-Unsubscribe=One-Click``:
source ``one_click``) or the page's button (source ``page``) - and answers 200 however
often it is repeated. A bad or tampered token gets a 400 page and changes nothing.
CSRF-exempt: the mail client's POST carries no token, and the worst a forged request can
do is what the link itself does."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from recipients.models import OptOutSource
from recipients.preferences import opt_out
from recipients.unsubscribe import BadToken, read_token

# What the one-click POST's body says (RFC 8058 §3.1).
ONE_CLICK = ("List-Unsubscribe", "One-Click")


def describe(scope: str) -> str:
    """What an opt-out of ``scope`` stops, in words for the page."""
    section, name, *rest = scope.split(".")
    channel = f" by {rest[-1].replace('_', '-')}" if rest else ""
    if section == "categories":
        return f"“{name}” messages{channel}"
    if section == "channels":
        return f"messages by {name.replace('_', '-')}"
    return f"“{name}” notifications{channel}"


def _page(request: HttpRequest, template: str, status: int, **context: str) -> HttpResponse:
    response = render(request, f"unsubscribe/{template}.html", context, status=status)
    # The URL carries the token: never cached, indexed or sent on as a referrer.
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    response["X-Robots-Tag"] = "noindex"
    return response


@csrf_exempt
@require_http_methods(["GET", "HEAD", "POST"])
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    try:
        recipient_id, scope = read_token(token)
    except BadToken:
        return _page(request, "invalid", 400)
    if request.method != "POST":
        return _page(request, "confirm", 200, what=describe(scope))
    one_click = request.POST.get(ONE_CLICK[0]) == ONE_CLICK[1]
    opt_out(
        recipient_id=recipient_id,
        scope=scope,
        source=OptOutSource.ONE_CLICK if one_click else OptOutSource.PAGE,
    )
    return _page(request, "done", 200, what=describe(scope))
