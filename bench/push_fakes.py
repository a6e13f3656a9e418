"""The push scenario's providers, in a process of their own (as a real provider is): the
SMTP, FCM, APNs, Web Push, Slack Web API and chat incoming-webhook fakes of the test
suite on loopback, so the bench process pays only the client's side. The chat fakes are
put behind TLS here (the services are HTTPS only; the tests' fakes speak plain HTTP).
``python -m bench.push_fakes <directory>`` writes the credentials and the test CA into
the directory, prints one JSON line - the settings that point the real clients at the
fakes, a browser subscription, the chat targets (a Slack channel, a Teams webhook), the
CA file - and serves until its stdin closes; then prints one JSON line of what the fakes
saw (their connections and messages) and exits."""

from __future__ import annotations

import json
import ssl
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.fake_chat import FakeChatWebhooks, FakeSlack
from tests.fake_push import FakeApns, FakeFcm
from tests.fake_smtp import FakeSmtpServer
from tests.fake_tls import make_local_ca, wrap_handler_socket
from tests.fake_webpush import FakeWebPush

CHAT_CHANNEL = "C0BENCH01"


def over_tls(fake: FakeSlack | FakeChatWebhooks, context: ssl.SSLContext) -> None:
    """Serve ``fake``'s connections over TLS (each wrapped in its handler's thread, as the
    Web Push fake does; its connection count unchanged: one per TCP connection)."""
    plain = fake.server.RequestHandlerClass

    class Handler(plain):  # type: ignore[misc, valid-type]
        def setup(self) -> None:
            wrap_handler_socket(self, context)
            super().setup()

    fake.server.RequestHandlerClass = Handler


def main(directory: Path) -> None:
    ca = make_local_ca(directory / "ca")
    smtp = FakeSmtpServer("accept")
    vapid = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    (directory / "vapid.pem").write_bytes(vapid)
    apns = FakeApns(ca, key_id="BENCH12345", team_id="TEAM123456", topic="bench.app")
    slack, hooks = FakeSlack(token="xoxb-bench-token"), FakeChatWebhooks()
    over_tls(slack, ca.server_context(["http/1.1"]))
    over_tls(hooks, ca.server_context(["http/1.1"]))
    slack.url = slack.url.replace("http://", "https://")
    hooks.base = hooks.base.replace("http://", "https://")
    with FakeFcm(ca) as fcm, apns, FakeWebPush(ca) as webpush, slack, hooks:
        settings = {
            **fcm.settings(directory),
            **apns.settings(directory),
            "NOTIFYFLOW_VAPID_PRIVATE_KEY": str(directory / "vapid.pem"),
            "NOTIFYFLOW_VAPID_SUBJECT": "mailto:bench@example.com",
            "NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS": [webpush.origin.removeprefix("https://")],
            "NOTIFYFLOW_EMAIL_BACKENDS": [smtp.provider("bench-smtp")],
            "NOTIFYFLOW_SLACK_BOT_TOKEN": slack.token,
            "NOTIFYFLOW_SLACK_API_URL": slack.url,
            "NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS": [hooks.base.removeprefix("https://")],
        }
        ready = {
            "settings": settings,
            "subscription": webpush.subscribe(),
            "chat": {"slack_channel": CHAT_CHANNEL, "msteams_webhook": hooks.url("msteams")},
            "ca": str(ca.ca_file),
        }
        print(json.dumps(ready), flush=True)
        sys.stdin.read()  # until the bench closes it
        seen = {
            "tls_connections": {
                "fcm": fcm.tls_connections,
                "apns": apns.tls_connections,
                "webpush": webpush.tls_connections,
                "slack": slack.connections,
                "msteams": hooks.connections,
            },
            "smtp_connections": smtp.connections,
            "received": {
                "fcm": len(fcm.received),
                "apns": len(apns.received),
                "webpush": len(webpush.received),
                "smtp": len(smtp.messages),
                "slack": len(slack.received),
                "msteams": len(hooks.received),
            },
        }
        print(json.dumps(seen), flush=True)
    smtp.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
