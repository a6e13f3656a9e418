"""The answer to an admin login refused by django-axes' lockout (``AXES_LOCKOUT_CALLABLE``).

The admin's own login page again - same form, same look - with the lockout message where
a wrong password's message goes, and status 429, so an operator sees why the right
password does not work now and how the lock ends (cool-off, or ``manage.py axes_reset``).
"""

from __future__ import annotations

from typing import Any

from axes.helpers import get_lockout_message
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _


class _LockedOutForm(AdminAuthenticationForm):
    """The login form as posted, whose only error is the lockout (it does not try to
    authenticate again: that would count one more failure)."""

    def clean(self) -> dict[str, Any]:
        raise ValidationError(get_lockout_message(), code="locked_out")


def lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict[str, Any] | None = None,
) -> HttpResponse:
    form = _LockedOutForm(request, data=request.POST)
    form.is_valid()
    context = {
        **admin.site.each_context(request),
        "title": _("Log in"),
        "subtitle": None,
        "app_path": request.get_full_path(),
        "form": form,
        REDIRECT_FIELD_NAME: request.POST.get(REDIRECT_FIELD_NAME, ""),
    }
    response = TemplateResponse(request, "admin/login.html", context, status=429)
    return response.render()
