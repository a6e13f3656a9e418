"""Unsubscribe tokens: signed, naming a recipient and a scope, never expiring."""

from __future__ import annotations

import pytest
from django.core import signing

from recipients.unsubscribe import BadToken, read_token, token_for, unsubscribe_url


def test_a_token_names_its_recipient_and_scope():
    token = token_for(recipient_id="ada", scope="categories.marketing")
    assert read_token(token) == ("ada", "categories.marketing")


@pytest.mark.parametrize(
    "tamper",
    [
        lambda t: t[:-1] + ("A" if t[-1] != "A" else "B"),  # the signature
        lambda t: ("X" if t[0] != "X" else "Y") + t[1:],  # the value
        lambda t: t[: len(t) // 2],  # cut short
        lambda t: "",
        lambda t: "not-a-token",
    ],
)
def test_a_tampered_token_is_refused(tamper):
    token = token_for(recipient_id="ada", scope="workflows.news")
    with pytest.raises(BadToken):
        read_token(tamper(token))


def test_a_token_signed_for_something_else_is_refused():
    with pytest.raises(BadToken):
        read_token(signing.dumps(["ada", "workflows.news"]))  # no unsubscribe salt
    with pytest.raises(BadToken):
        read_token(signing.dumps({"id": "ada"}, salt="notifyflow.unsubscribe"))


def test_a_token_never_expires(monkeypatch):
    token = token_for(recipient_id="ada", scope="workflows.news")
    monkeypatch.setattr("time.time", lambda: 4_000_000_000.0)  # 2096
    assert read_token(token) == ("ada", "workflows.news")


def test_the_url_is_under_the_public_url_and_none_without_it(settings):
    settings.NOTIFYFLOW_PUBLIC_URL = "https://notify.example.com"
    url = unsubscribe_url(recipient_id="ada", scope="workflows.news")
    assert url is not None and url.startswith("https://notify.example.com/u/")
    assert read_token(url.removeprefix("https://notify.example.com/u/").rstrip("/")) == (
        "ada",
        "workflows.news",
    )
    settings.NOTIFYFLOW_PUBLIC_URL = ""
    assert unsubscribe_url(recipient_id="ada", scope="workflows.news") is None
