"""The push scenario's providers, in a process of their own (as a real provider is): the
SMTP, FCM, APNs and Web Push fakes of the test suite on loopback, so the bench process
pays only the client's side. ``python -m bench.push_fakes <directory>`` writes the
credentials and the test CA into the directory, prints one JSON line - the settings
that point the real clients at the fakes, a browser subscription, the CA file - and
serves until its stdin closes; then prints one JSON line of what the fakes saw (their
TLS connections and messages) and exits."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.fake_push import FakeApns, FakeFcm
from tests.fake_smtp import FakeSmtpServer
from tests.fake_tls import make_local_ca
from tests.fake_webpush import FakeWebPush


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
    with FakeFcm(ca) as fcm, apns, FakeWebPush(ca) as webpush:
        settings = {
            **fcm.settings(directory),
            **apns.settings(directory),
            "NOTIFYFLOW_VAPID_PRIVATE_KEY": str(directory / "vapid.pem"),
            "NOTIFYFLOW_VAPID_SUBJECT": "mailto:bench@example.com",
            "NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS": [webpush.origin.removeprefix("https://")],
            "NOTIFYFLOW_EMAIL_BACKENDS": [smtp.provider("bench-smtp")],
        }
        ready = {"settings": settings, "subscription": webpush.subscribe(), "ca": str(ca.ca_file)}
        print(json.dumps(ready), flush=True)
        sys.stdin.read()  # until the bench closes it
        seen = {
            "tls_connections": {
                "fcm": fcm.tls_connections,
                "apns": apns.tls_connections,
                "webpush": webpush.tls_connections,
            },
            "smtp_connections": smtp.connections,
            "received": {
                "fcm": len(fcm.received),
                "apns": len(apns.received),
                "webpush": len(webpush.received),
                "smtp": len(smtp.messages),
            },
        }
        print(json.dumps(seen), flush=True)
    smtp.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
