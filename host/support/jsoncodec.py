"""JSON read from the database and written to API clients: orjson where it gives the same
answer as the standard library, the standard library where it would not.

orjson encodes and decodes in C, several times faster than :mod:`json`: a run console of a
100-step run is a few hundred JSON values read from the database and some seventy kilobytes
written to the client, so this is most of what a console GET costs. It differs from
:mod:`json` at the edges, and each edge keeps :mod:`json`'s answer:

- an integer beyond 64 bits, which orjson refuses to write and reads as a float, is written
  and read by :mod:`json` (exactly);
- ``NaN`` and ``Infinity``, which orjson reads as an error, are read by :mod:`json` (the
  database's JSON is still written by :mod:`json`, which writes them);
- a dict key that is not a string is written as text, as :mod:`json` does;
- a datetime goes to the caller's ``default`` (the API writes instants its own way).

One difference stays: a float that is not a number is written to a client as ``null``
(:mod:`json` would write ``NaN``, which is not JSON and which clients refuse).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME
#: Nineteen digits or more may be an integer past 64 bits (orjson would read a float).
_LONG_DIGITS = re.compile(r"\d{19}")
_LONG_DIGIT_BYTES = re.compile(rb"\d{19}")


def dumps_bytes(data: Any, default: Callable[[Any], Any] | None = None) -> bytes:
    """``data`` as UTF-8 JSON bytes; ``default`` turns what JSON has no type for into what it
    has (and raises ``TypeError`` for what it cannot)."""
    try:
        if default is None:
            return orjson.dumps(data, option=_OPTIONS)
        return orjson.dumps(data, default=default, option=_OPTIONS)
    except orjson.JSONEncodeError as exc:
        if isinstance(exc.__cause__, TypeError):
            raise exc.__cause__ from None  # ``default`` refused the value: its own error
        # Beyond orjson (an integer past 64 bits; a type with no ``default``): json answers,
        # or raises its own TypeError.
        return json.dumps(data, default=default, ensure_ascii=False).encode()


def dumps(data: Any, default: Callable[[Any], Any] | None = None) -> str:
    """:func:`dumps_bytes` as text."""
    return dumps_bytes(data, default).decode()


def loads(text: str | bytes) -> Any:
    """JSON text as Python values, as :mod:`json` reads them (``NaN``, ``Infinity`` and
    integers of any size included)."""
    long_digits = _LONG_DIGITS if isinstance(text, str) else _LONG_DIGIT_BYTES
    if long_digits.search(text) is None:  # type: ignore[arg-type]  # the pattern's type follows text's (str or bytes), beyond mypy
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)
