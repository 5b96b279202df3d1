"""A value typed in as text (``--param tier=3``, ``--payload count=2``) read as one of the
contract's value types: ``string``, ``integer``, ``number`` or ``boolean``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pageant.errors import Invalid

_TRUE = ("true", "yes", "1")
_FALSE = ("false", "no", "0")


def read_typed(kind: str, text: str) -> Any:
    """``text`` as a value of ``kind``; ``ValueError`` when it is not one (a number that is
    not finite included). An unknown ``kind`` keeps the text as it is."""
    if kind == "integer":
        return int(text)
    if kind == "number":
        value = float(text)
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(text)
        return value
    if kind == "boolean":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError(text)
    return text


def read_words(
    words: Sequence[str],
    types: Mapping[str, str],
    *,
    name: str,
    where: Callable[[str, str, str], str],
    refusal: str,
) -> dict[str, Any]:
    """Values from ``NAME=VALUE`` words (a command line's), each read as the type ``types``
    gives its name (text for a name it does not know). Raises :class:`Invalid` with
    ``refusal`` and a problem per word it cannot read, so every reader of such words
    refuses alike. ``name`` spells NAME in the problem of a word without ``=``;
    ``where(name, text, kind)`` words the problem of a value that is not its kind."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    for word in words:
        key, sep, text = word.partition("=")
        if not sep or not key:
            problems.append(f"{word!r}: expected {name}=VALUE")
            continue
        kind = types.get(key, "string")
        try:
            values[key] = read_typed(kind, text)
        except ValueError:
            problems.append(where(key, text, kind))
    if problems:
        raise Invalid(refusal, details=problems)
    return values
