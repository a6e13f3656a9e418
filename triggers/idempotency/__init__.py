"""Idempotency-key strategies of workflow triggers (docs/api.md#binding-settings).

``IdempotencySettings.parse`` validates a setting; ``generator_for`` picks the key
generator; ``parse_template`` is the safe ``#{...}`` evaluator of CUSTOM_EXPRESSION.
"""

from .config import IdempotencySettings, SettingsError, Strategy, default_setting_json
from .expression import ExpressionError, MissingValueError, parse_template
from .factory import ResolvedSettings, generator_for, resolve_settings
from .generators import KeyGenerationError, KeyGenerator, cap_key, window_start_ms

__all__ = [
    "ExpressionError",
    "IdempotencySettings",
    "KeyGenerationError",
    "KeyGenerator",
    "MissingValueError",
    "ResolvedSettings",
    "SettingsError",
    "Strategy",
    "cap_key",
    "default_setting_json",
    "generator_for",
    "parse_template",
    "resolve_settings",
    "window_start_ms",
]
