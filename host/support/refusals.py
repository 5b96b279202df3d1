"""How a checker words what it refuses, shared by every layer that reads authored JSON (a
spec, a schedule, a blackout's periods, a requirement): the value as it was sent, a key
outside the known ones, a list that is not one or is too long. One wording, so the 400s of
different checks read alike and each keeps the sentence its tests quote."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["an_object", "bounded_list", "refuse_unknown", "show"]


def show(value: Any) -> str:
    """A value as it was sent (JSON), shortened to fit in one message."""
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


def bounded_list(
    raw: Any,
    path: str,
    errors: list[str],
    expected: str,
    most: int,
    items: str,
    has: str = "got",
    *,
    empty: bool = False,
    quote: bool = True,
) -> list[Any] | None:
    """``raw`` when it is a list of at most ``most`` items, and not empty unless ``empty``
    (which also answers ``[]`` for an absent list, None); else None, with the reason
    appended to ``errors``: ``{path}: {expected}; got {raw}``
    when it is no list (``quote=False`` leaves the value out), ``{path}: at most {most}
    {items}; {has} {count}`` when it is too long. The length is checked before anything
    inside, so a pasted list of thousands is refused by its size, not answered with
    thousands of errors."""
    if raw is None and empty:
        return []
    if not isinstance(raw, list) or not (raw or empty):
        errors.append(f"{path}: {expected}; got {show(raw)}" if quote else f"{path}: {expected}")
        return None
    if len(raw) > most:
        errors.append(f"{path}: at most {most} {items}; {has} {len(raw)}")
        return None
    return raw


def an_object(
    raw: Any, path: str, errors: list[str], holding: str | None = None
) -> dict[str, Any] | None:
    """``raw`` when it is an object; else None, with ``{path}: expected an object
    {holding}; got {raw}`` appended to ``errors`` (``holding`` says what it holds: "with
    a policy", "of the reading's params")."""
    if isinstance(raw, dict):
        return raw
    expected = f"an object {holding}" if holding else "an object"
    errors.append(f"{path}: expected {expected}; got {show(raw)}")
    return None
