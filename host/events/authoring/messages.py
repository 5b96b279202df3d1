"""How the spec validator and its gate grammar word what they refuse, in one place."""

from __future__ import annotations

import json
from typing import Any


def show(value: Any) -> str:
    """A value as its author wrote it (JSON), shortened to fit in one message."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def refuse_unknown(
    raw: dict[Any, Any], allowed: tuple[str, ...], path: str, errors: list[str], what: str = ""
) -> bool:
    """One error per key outside ``allowed`` (``what`` says of what, e.g. ' for an "on"
    gate'); answers whether there was any."""
    found = False
    for key in raw:
        if key not in allowed:
            found = True
            expected = ", ".join(allowed) if allowed else "no other keys"
            errors.append(f"{path}: unknown key {show(key)}{what}; expected {expected}")
    return found
