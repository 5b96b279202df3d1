"""Match keys: how a firing finds the gates it can count for without reading the others.

A gate's condition usually pins one variable to one value — ``server eq "eu-2"``, often
written ``{"var": "server", "op": "eq", "value": {"param": "server"}}`` and written out
when the gate opens. That equality is the gate's **match key** (``server="eu-2"``), stored
on its row and indexed with its trigger. A firing computes the keys it carries, one per
variable of its payload, and reads only the open gates whose key is among them, and the
gates with no key (``''``: no equality narrows them, so every firing is judged). A gate
whose key the firing does not carry could not have matched, so it is neither read nor
written: the cost of a firing is what it can match, not what is open.

The key is one equality the condition *requires*: the condition itself, or one member of a
top-level ``all`` (any depth of ``all``). An equality under ``any`` or ``not`` does not
narrow the gate, and such a gate keeps ``''``. The full condition is still evaluated on the
gates a firing reads; the key only decides which are read.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

#: Every firing reads the gates that carry no key.
NO_KEY = ""
#: The column is 255 characters; a longer key is kept as its variable and a hash.
MAX_KEY = 255


def _canonical(value: Any) -> Any:
    # 2 and 2.0 are one value to the evaluator (``2 == 2.0``), so they are one key.
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def match_key(var: str, value: Any) -> str:
    """The key of ``var == value``: ``server="eu-2"``, ``level=3``, ``boss=true``."""
    key = f"{var}={json.dumps(_canonical(value), ensure_ascii=False)}"
    if len(key) > MAX_KEY:
        key = f"{var}#{hashlib.sha256(key.encode()).hexdigest()}"
    return key


def gate_key(condition: Mapping[str, Any] | None) -> str:
    """The match key of a gate's condition, or :data:`NO_KEY` when no equality narrows it."""
    if not isinstance(condition, Mapping):
        return NO_KEY
    if condition.get("op") == "eq" and isinstance(condition.get("var"), str):
        value = condition.get("value")
        if isinstance(value, (str, int, float, bool)):
            return match_key(condition["var"], value)
        return NO_KEY
    members = condition.get("all")
    if isinstance(members, list):
        for member in members:
            key = gate_key(member)
            if key != NO_KEY:
                return key
    return NO_KEY


def firing_keys(payload: Mapping[str, Any]) -> list[str]:
    """The keys a firing carries: one per variable of its (checked) payload, and
    :data:`NO_KEY`."""
    return [NO_KEY, *(match_key(var, value) for var, value in payload.items())]
