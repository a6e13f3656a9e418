"""The push and chat fakes, running, with the settings and TLS trust that point the real
clients at them (the provider clients' tests and the push and chat nodes' use them);
every test starts and ends with no provider client built."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from executions.providers import connections
from tests.fake_chat import FakeChatWebhooks, FakeSlack
from tests.fake_push import FakeApns, FakeFcm
from tests.fake_tls import LocalCA, make_local_ca
from tests.fake_webpush import FakeWebPush


@pytest.fixture(scope="session")
def local_ca(tmp_path_factory) -> LocalCA:
    return make_local_ca(tmp_path_factory.mktemp("test-ca"))


@pytest.fixture
def trusted(monkeypatch, local_ca):
    """SSL_CERT_FILE names the test CA; the clients are built (and closed) per test."""
    monkeypatch.setenv("SSL_CERT_FILE", str(local_ca.ca_file))
    connections.close_all()
    yield local_ca
    connections.close_all()


def apply(settings, values: dict) -> None:
    for name, value in values.items():
        setattr(settings, name, value)


@pytest.fixture
def fake_apns(trusted, settings, tmp_path):
    with FakeApns(
        trusted, key_id="ABC123DEFG", team_id="TEAM123456", topic="com.example.app"
    ) as fake:
        apply(settings, fake.settings(tmp_path))
        yield fake


@pytest.fixture
def fake_fcm(trusted, settings, tmp_path):
    with FakeFcm(trusted) as fake:
        apply(settings, fake.settings(tmp_path))
        yield fake


@pytest.fixture
def vapid_key(tmp_path) -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture
def fake_webpush(trusted, settings, tmp_path, vapid_key):
    pem = vapid_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    (tmp_path / "vapid.pem").write_bytes(pem)
    with FakeWebPush(trusted) as fake:
        settings.NOTIFYFLOW_WEBPUSH_ALLOWED_HOSTS = [fake.origin.removeprefix("https://")]
        settings.NOTIFYFLOW_VAPID_PRIVATE_KEY = str(tmp_path / "vapid.pem")
        settings.NOTIFYFLOW_VAPID_SUBJECT = "mailto:ops@example.com"
        yield fake


@pytest.fixture
def fake_slack(settings):
    connections.close_all()
    with FakeSlack() as fake:
        settings.NOTIFYFLOW_SLACK_BOT_TOKEN = fake.token
        settings.NOTIFYFLOW_SLACK_API_URL = fake.url
        yield fake
    connections.close_all()


@pytest.fixture
def fake_webhooks(settings):
    connections.close_all()
    with FakeChatWebhooks() as fake:
        # 127.0.0.1:9 (discard) too: the tests' unreachable webhook.
        host = fake.base.removeprefix("http://")
        settings.NOTIFYFLOW_WEBHOOK_ALLOWED_HOSTS = [host, "127.0.0.1:9"]
        yield fake
    connections.close_all()
