"""Standard Webhooks signatures: what an independent implementation of the spec (the
``standardwebhooks`` package) accepts, and a rotation's two signatures."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from pathlib import Path

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from status_webhooks import signing


def test_a_new_secret_is_whsec_and_the_base64_of_32_random_bytes():
    one, two = signing.secret_generate(), signing.secret_generate()
    assert one.startswith("whsec_") and one != two
    assert len(base64.b64decode(one.removeprefix("whsec_"))) == 32


def test_the_headers_verify_with_the_standardwebhooks_library():
    secret = signing.secret_generate()
    body = b'{"id":"e1","type":"instance.completed","created_at":"2026-01-01T00:00:00Z","data":{}}'
    headers = signing.headers(
        signing_secrets=[secret], msg_id="e1", timestamp=int(time.time()), body=body
    )
    assert headers["webhook-id"] == "e1"
    assert headers["webhook-signature"].startswith("v1,")
    assert Webhook(secret).verify(body, headers)["type"] == "instance.completed"


def test_a_changed_body_or_another_secret_does_not_verify():
    secret = signing.secret_generate()
    headers = signing.headers(
        signing_secrets=[secret], msg_id="e1", timestamp=int(time.time()), body=b"{}"
    )
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(b'{"a":1}', headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(signing.secret_generate()).verify(b"{}", headers)


def test_during_a_rotation_both_secrets_sign_and_each_verifies():
    new, old = signing.secret_generate(), signing.secret_generate()
    body = b'{"ok":true}'
    headers = signing.headers(
        signing_secrets=[new, old], msg_id="e2", timestamp=int(time.time()), body=body
    )
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert Webhook(new).verify(body, headers) == {"ok": True}
    assert Webhook(old).verify(body, headers) == {"ok": True}


def test_the_signature_is_the_documented_hmac_by_hand():
    key = b"0123456789abcdef0123456789abcdef"
    secret = "whsec_" + base64.b64encode(key).decode()
    got = signing.signature(secret=secret, msg_id="msg_1", timestamp=1700000000, body=b"{}")
    digest = hmac.new(key, b"msg_1.1700000000.{}", hashlib.sha256).digest()
    assert got == "v1," + base64.b64encode(digest).decode()


def test_the_by_hand_verifier_of_the_docs_accepts_a_signed_message_and_refuses_a_forged_one():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    after = docs.split("By hand, with the standard library:", 1)[1]
    code = after.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(code, namespace)  # noqa: S102 - the docs' own example
    secret, body = signing.secret_generate(), b'{"id":"e3"}'
    headers = signing.headers(
        signing_secrets=[signing.secret_generate(), secret],
        msg_id="e3",
        timestamp=int(time.time()),
        body=body,
    )
    assert namespace["verify"](secret, headers, body) is True
    assert namespace["verify"](secret, headers, b'{"id":"e4"}') is False
    assert namespace["verify"](signing.secret_generate(), headers, body) is False
