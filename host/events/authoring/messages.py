"""How the spec validator and its gate grammar word what they refuse, in one place."""

from __future__ import annotations

from typing import Any

from pageant.runs.params import show

__all__ = ["refuse_unknown", "show"]


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
