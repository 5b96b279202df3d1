"""Progress players can see: a count gate marked ``"public": true`` in its ``advance``.

::

    "advance": {"on": "arena.boss_slain", "count": 50, "public": true,
                "label": "Bosses slain tonight"}

The public event page then shows the gate's ``label``, its tally and its count for each run
under way (:func:`pageant.schedules.public_pages.progress`) — and nothing else of the gate:
not its trigger, its condition or its phase, which are the staff's. ``label`` is what
players read; without one they read the phase's label.
"""

from __future__ import annotations

from typing import Any

from pageant.support.refusals import show

#: A label is one line on a public page, beside "37 of 50".
MAX_PUBLIC_LABEL = 100


def validate_public(raw: dict[str, Any], path: str, errors: list[str]) -> dict[str, Any]:
    """The public keys of an ``on`` gate, normalised (``{}`` when it is not public; a
    ``label`` only with ``public: true``); each problem goes to ``errors`` with its place."""
    public = raw.get("public")
    label = raw.get("label")
    if public is None or public is False:
        if label is not None:
            errors.append(f'{path}.label: a label is what players read; give "public": true too')
        return {}
    if public is not True:
        errors.append(f"{path}.public: expected true or false; got {show(public)}")
        return {}
    if label is None:
        return {"public": True}
    if not isinstance(label, str) or not label.strip():
        errors.append(f"{path}.label: expected the text players read; got {show(label)}")
        return {"public": True}
    if len(label) > MAX_PUBLIC_LABEL or "\n" in label or "\r" in label:
        errors.append(
            f"{path}.label: one line of at most {MAX_PUBLIC_LABEL} characters; got {len(label)}"
        )
        return {"public": True}
    return {"public": True, "label": label.strip()}
