"""Delivery status callbacks from the providers that are not anymail's:
Twilio's signed message status callback. The recording is ``executions.tracking``'s."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from executions import tracking


def _twilio_auth_tokens() -> list[str]:
    """Every auth token a message could have been sent with (failover accounts too)."""
    tokens = [settings.TWILIO_AUTH_TOKEN]
    for entry in settings.NOTIFYFLOW_SMS_BACKENDS:
        if isinstance(entry, dict):
            tokens.append((entry.get("options") or {}).get("auth_token", ""))
    return [t for t in tokens if t]


@csrf_exempt
@require_POST
def twilio_status_callback(request: HttpRequest) -> HttpResponse:
    """Twilio's message status callback. 403 unless X-Twilio-Signature is valid for one
    of our auth tokens (twilio.request_validator), over the URL Twilio was given
    (NOTIFYFLOW_TWILIO_STATUS_CALLBACK_URL, else this request's own URL)."""
    from twilio.request_validator import RequestValidator

    signature = request.headers.get("X-Twilio-Signature", "")
    url = settings.NOTIFYFLOW_TWILIO_STATUS_CALLBACK_URL or request.build_absolute_uri()
    params = request.POST.dict()
    if not signature or not any(
        RequestValidator(token).validate(url, params, signature) for token in _twilio_auth_tokens()
    ):
        return HttpResponseForbidden("invalid Twilio signature")
    twilio_status = params.get("MessageStatus", "")
    tracking.delivery_status_record(
        provider="twilio",
        message_id=params.get("MessageSid", ""),
        provider_event=twilio_status,
        status=tracking.TWILIO_STATUSES.get(twilio_status),
        raw=params,
        occurred_at=timezone.now(),
    )
    return HttpResponse(status=204)
