"""The columns of an instance's step logs in the console (``console.instances.inlines``):
what a row says about its run, its outcome and the locale it rendered in."""

from __future__ import annotations

from console.instances.inlines import run_label, skip_text, step_locale, step_outcome
from executions.models import StepExecutionLog


def log(**fields) -> StepExecutionLog:
    return StepExecutionLog(**{"attempt": 1, "success": True, "output": {}, **fields})


def test_a_step_that_used_no_translation_shows_no_locale():
    assert step_locale(log(output={"message_id": "m"})) == "-"


def test_the_locale_a_step_rendered_in_is_shown_with_the_keys_it_lacked():
    shown = step_locale(log(output={"locale": "fr", "translation_missing": ["bye", "eta"]}))
    assert "<code>fr</code>" in shown
    assert 'title="bye, eta">2 missing' in shown


def test_a_push_devices_own_locale_that_lacked_keys_is_shown_beside_the_steps():
    output = {
        "locale": "en",
        "translation_missing": [],
        "translation_missing_by_locale": {"pt-BR": ["eta"]},
    }
    shown = step_locale(log(output=output))
    assert shown.startswith("<code>en</code>, <code>pt-BR</code>")
    assert 'title="eta">1 missing' in shown


def test_a_run_after_an_operator_retry_names_its_retry_budget():
    row = log(attempt=1)
    row.run_number = 3
    assert run_label(row) == "3 (retry budget 1)"
    assert run_label(log(attempt=2)) == "2"
    assert run_label(log(parked=True)) == "parked (not an attempt)"


def test_a_skip_is_shown_with_its_reason_and_rule():
    assert skip_text("preference_opt_out", "categories.marketing") == (
        "preference_opt_out, rule categories.marketing"
    )
    shown = step_outcome(log(skip_reason="preference_opt_out", output={"rule": "channel.email"}))
    assert "preference_opt_out" in shown and "rule <code>channel.email</code>" in shown
    assert "failed" in step_outcome(log(success=False))
