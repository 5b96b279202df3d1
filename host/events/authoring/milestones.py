"""A public count gate's milestones: ``milestones`` in an ``on`` gate's ``advance``, checked
when the spec is saved.

::

    "advance": {"on": "arena.boss_slain", "count": 50, "public": true,
                "label": "Bosses slain tonight",
                "milestones": {"at": [25, 50, 75, 100], "legs": ["core.discord"],
                               "message": "Bosses slain tonight: {count} of {target}"}}

:func:`validate_milestones` is called by :func:`pageant.events.authoring.advance.validate_advance`
for an ``on`` gate; what a run makes of it is :mod:`pageant.runs.milestones`. The legs and
the message are checked as a countdown's are
(:mod:`pageant.events.authoring.countdown`), with the milestone's own placeholders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pageant.events.authoring.countdown import validate_legs, validate_message
from pageant.runs.milestones import PLACEHOLDERS, reached_at
from pageant.support.refusals import an_object, bounded_list, refuse_unknown, show

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry

MILESTONE_KEYS = ("at", "legs", "message")
#: More milestones than this is a channel spammed, not a count told.
MAX_MILESTONES = 10


def validate_milestones(
    raw: Any,
    path: str,
    registry: Registry,
    errors: list[str],
    *,
    public: bool,
    count: int,
) -> dict[str, Any] | None:
    """A gate's milestones, normalised (``at`` ascending); ``None`` when absent or refused,
    each problem appended to ``errors`` prefixed by ``path``. ``public`` and ``count`` are
    the gate's: milestones are told to players, so only a public gate has them, and two
    percentages reached at the same tally of ``count`` would say the same thing twice."""
    if raw is None:
        return None
    if not public:
        errors.append(f'{path}: milestones are announced to players; give the gate "public": true')
        return None
    if (raw := an_object(raw, path, errors, "with at, legs and message")) is None:
        return None
    problems: list[str] = []
    refuse_unknown(raw, MILESTONE_KEYS, path, problems)
    at = _at(raw.get("at"), f"{path}.at", count, problems)
    legs = validate_legs(raw.get("legs"), f"{path}.legs", registry, problems)
    message = validate_message(raw.get("message"), f"{path}.message", problems, PLACEHOLDERS)
    errors.extend(problems)
    if problems:
        return None
    return {"at": at, "legs": legs, "message": message}


def _at(raw: Any, path: str, count: int, errors: list[str]) -> list[int]:
    what = "expected a list of percentages such as [25, 50, 75, 100]"
    raw = bounded_list(raw, path, errors, what, MAX_MILESTONES, "milestones")
    if raw is None:
        return []
    seen: dict[int, int] = {}
    for i, percent in enumerate(raw):
        if isinstance(percent, bool) or not isinstance(percent, int) or not 1 <= percent <= 100:
            errors.append(
                f"{path}[{i}]: expected a whole percentage from 1 to 100; got {show(percent)}"
            )
            continue
        tally = reached_at(count, percent)
        if tally in seen:
            errors.append(
                f"{path}[{i}]: {percent}% of {count} is {tally}, as is {path}[{seen[tally]}]; "
                "name each count once"
            )
            continue
        seen[tally] = i
    return sorted(raw[i] for i in seen.values())
