"""Typed settings read from the environment: an unset or empty variable is the default;
a value that is not of the type - a misspelt boolean too - refuses to start, naming the
variable; lists are comma-separated; providers are names or a JSON list."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from notifyflow.env import env_bool, env_float, env_int, env_list, env_providers

NAME = "NOTIFYFLOW_TEST_VARIABLE"


@pytest.fixture
def variable(monkeypatch):
    monkeypatch.delenv(NAME, raising=False)
    return lambda value: monkeypatch.setenv(NAME, value)


@pytest.mark.parametrize(("value", "read"), [("1", True), (" Yes ", True), ("off", False)])
def test_a_boolean_takes_the_usual_spellings(variable, value, read):
    variable(value)
    assert env_bool(NAME, not read) is read


def test_an_unset_or_empty_variable_is_the_default(variable):
    assert env_bool(NAME, True) is True and env_int(NAME, 7) == 7 and env_list(NAME) == []
    variable("  ")
    assert env_bool(NAME, False) is False and env_float(NAME, 0.5) == 0.5
    assert env_providers(NAME) == []


@pytest.mark.parametrize(
    ("read", "value"),
    [(lambda: env_bool(NAME, False), "ture"), (lambda: env_int(NAME, 1), "1.5")],
)
def test_a_value_of_the_wrong_type_refuses_to_start_naming_the_variable(variable, read, value):
    variable(value)
    with pytest.raises(ImproperlyConfigured, match=NAME):
        read()


def test_numbers_and_lists_are_parsed(variable):
    variable("42")
    assert (env_int(NAME, 0), env_float(NAME, 0.0)) == (42, 42.0)
    variable(" a, b ,,c ")
    assert env_list(NAME) == ["a", "b", "c"]


def test_providers_are_names_or_a_json_list_of_backends(variable):
    variable("smtp, ses")
    assert env_providers(NAME) == ["smtp", "ses"]
    variable('[{"name": "main", "backend": "x.Backend"}, "y.Backend"]')
    assert env_providers(NAME) == [{"name": "main", "backend": "x.Backend"}, "y.Backend"]
    for wrong in ("[not json", '[{"name": "no backend"}]'):
        variable(wrong)
        with pytest.raises(ImproperlyConfigured, match=NAME):
            env_providers(NAME)
