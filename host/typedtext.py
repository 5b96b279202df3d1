"""A value typed in as text (``--param tier=3``, ``--payload count=2``) read as one of the
contract's value types: ``string``, ``integer``, ``number`` or ``boolean``."""

from __future__ import annotations

from typing import Any

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
