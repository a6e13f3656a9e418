"""Liquid's filters, bounded before they allocate.

python-liquid checks its output limit when text is written, after a filter has built
it: ``{{ s | split: "" | join: s }}`` builds len(s)² bytes first (256 MB from a 16 KB
payload). Every filter of an environment made by ``templating.liquid_environment`` is
wrapped here:

- before the call, the filters whose result can outgrow their inputs by more than a
  constant factor (``join``, ``replace``, ``split``, ``concat``, ``append``, ``times``,
  ...) compute the size of their result from their arguments and refuse one over the
  limit;
- before the call, a range (``(1..n)``, lazy) of more items than the limit is refused
  by every filter that would make a list of it;
- after the call, any string or list result over the limit is refused, so a chain of
  filters that each grow their input by a constant factor (``escape``, ``url_encode``)
  stops at the limit too.

The limit is the environment's output limit (NOTIFYFLOW_TEMPLATE_OUTPUT_LIMIT), in
characters for a string and items for a list; a refusal raises python-liquid's
``OutputStreamLimitError``, which ``templating`` reports as a TemplateLimitError.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from liquid.exceptions import OutputStreamLimitError
from liquid.undefined import Undefined

# Integers are refused past this many bits (about 4,200 decimal digits): Python will not
# print a longer one (sys.int_max_str_digits), and repeated ``times`` would grow it
# without end.
MAX_INT_BITS = 14_000

# Filters that read a range without making a list of it.
_RANGE_SAFE = frozenset({"size", "first", "last", "join", "default"})

Filter = Callable[..., Any]
SizeCheck = Callable[..., int]


def _is(value: Any, types: type | tuple[type, ...] | Any) -> bool:
    """``isinstance`` by the value's type alone: a strict undefined raises on any attribute
    read, ``__class__`` (which ``isinstance`` may read) included."""
    return issubclass(type(value), types)


def _text(value: Any) -> str:
    """The string a string filter makes of its argument (liquid's ``soft_str``)."""
    if value is None or _is(value, Undefined):
        return ""
    return value if _is(value, str) else str(value)


def _length(value: Any) -> int:
    return len(value) if _is(value, str | list | tuple | range) else len(_text(value))


def _join_size(limit: int, left: Any, separator: Any = " ", *_: Any, **__: Any) -> int:
    if not _is(left, list | tuple | range):
        return 0  # not a sequence: liquid refuses it
    size = -len(_text(separator)) if len(left) else 0
    gap = len(_text(separator))
    for item in left:  # stops at the limit: never more than ``limit`` characters read
        size += gap + _length(item)
        if size > limit:
            break
    return size


def _replace_size(limit: int, left: Any, old: Any = "", new: Any = "", *_: Any, **__: Any) -> int:
    text, old, new = _text(left), _text(old), _text(new)
    # str.count("") is len + 1: an empty ``old`` inserts ``new`` around every character.
    return len(text) + text.count(old) * (len(new) - len(old))


def _once_size(limit: int, left: Any, old: Any = "", new: Any = "", *_: Any, **__: Any) -> int:
    return len(_text(left)) + len(_text(new))


def _sum_size(limit: int, left: Any, other: Any = "", *_: Any, **__: Any) -> int:
    return _length(left) + _length(other)


def _split_size(limit: int, left: Any, separator: Any = None, *_: Any, **__: Any) -> int:
    text = _text(left)
    separator = _text(separator)
    return len(text) if not separator else text.count(separator) + 1


def _times_size(limit: int, left: Any, other: Any = 0, *_: Any, **__: Any) -> int:
    if _is(left, int) and _is(other, int):
        bits = abs(left).bit_length() + abs(other).bit_length()
        return limit + 1 if bits > MAX_INT_BITS else 0
    return 0  # floats saturate at inf; strings are parsed into numbers first


# What each amplifying filter's result will measure (characters, or items for a list),
# from the limit (where counting may stop) and the filter's own arguments.
SIZE_CHECKS: dict[str, SizeCheck] = {
    "join": _join_size,
    "replace": _replace_size,
    "replace_first": _once_size,
    "replace_last": _once_size,
    "append": _sum_size,
    "prepend": _sum_size,
    "concat": _sum_size,
    "split": _split_size,
    "times": _times_size,
}


def _over(message: str) -> OutputStreamLimitError:
    return OutputStreamLimitError(f"output limit reached: {message}", token=None)


def bounded_filter(name: str, func: Filter, *, limit: int) -> Filter:
    """``func`` refusing, before and after it runs, a result larger than ``limit``."""
    size_check = SIZE_CHECKS.get(name)

    @wraps(func)
    def bounded(left: Any, *args: Any, **kwargs: Any) -> Any:
        if _is(left, range) and len(left) > limit and name not in _RANGE_SAFE:
            raise _over(f"{name}: a range of {len(left)} items is over the limit of {limit}")
        if size_check is not None:
            plain = {k: v for k, v in kwargs.items() if k not in ("environment", "context")}
            size = size_check(limit, left, *args, **plain)
            if size > limit:
                raise _over(f"{name}: the result would be over the limit of {limit}")
        result = func(left, *args, **kwargs)
        if _is(result, str | list | tuple) and len(result) > limit:
            raise _over(f"{name}: the result is over the limit of {limit}")
        if _is(result, int) and result.bit_length() > MAX_INT_BITS:
            raise _over(f"{name}: the number is over the limit of {MAX_INT_BITS} bits")
        return result

    # Rendering is synchronous; an async twin copied by ``wraps`` would skip the checks.
    bounded.__dict__.pop("filter_async", None)
    return bounded


def bound_filters(filters: dict[str, Filter], *, limit: int) -> dict[str, Filter]:
    return {name: bounded_filter(name, func, limit=limit) for name, func in filters.items()}
