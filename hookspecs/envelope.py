"""The envelope: what ``perform`` and ``revert`` answer, and the one function that reads it.

A callable answers one of::

    {"ok": True}                                   # done
    {"ok": True, "resources": [{"kind": "npc", "ref": "0x1f"}]}   # done, created these
    {"ok": True, "hold_for": 30}                   # done; delay what follows by 30 s
    {"ok": True, "park": True}                     # done once a person confirms it
    {"ok": True, "participants": [{"name": "Ada", "role": "tank"}]}  # who took part (1.1)
    {"ok": True, "results": {"title": "Boss rush", "entries": [
        {"rank": 1, "name": "Ada", "detail": "4:12"}]}}              # how it ended (1.1)
    {"ok": True, "spent": {"mygame.npcs": 2}}    # done; the game made 2 of what cost reserved (1.3)
    {"ok": False, "retry": True, "error": "shard busy"}           # failed, may retry
    {"ok": False, "retry": False, "error": "no such region"}      # failed for good

**A raised exception, a timeout past the action's ``budget_ms``, an answer that is not a
mapping and an answer without ``ok`` all read as ``{"ok": False, "retry": True}``.** The
expensive mistake is recording a world change that did not happen; a retry of something
that did happen is made harmless by the step's idempotency key.

**An answer the host could not store is refused, never cut to fit**: an ``error`` longer
than :data:`MAX_ERROR_BYTES`, more than :data:`MAX_RESOURCES` resources, a resource whose
``kind`` is not text of at most :data:`MAX_KIND_CHARS` characters, whose ``ref`` is longer
than :data:`MAX_REF_CHARS`, or whose detail is not JSON, and a ``hold_for`` past
:data:`MAX_HOLD_SECONDS`. Each reads as the plugin's retryable failure, with an error that
names the field and its limit (contract 1.2).

**``spent`` settles the step's charge** (contract 1.3): ``{dimension: amount}``, what the
game confirmed it made, read on a ``done`` or parked answer only. The host reserved the
step's ``cost`` before the perform; it keeps the smaller of the two for each dimension the
answer names and gives the rest back to the run, for later steps. A dimension the answer
does not name stays charged in full, an amount above the reservation is cut to it (with a
warning in the host's log), and with no ``spent`` the whole reservation stays spent. A
``spent`` that is not a mapping of dimension names to numbers from 0 up reads as the
plugin's retryable failure, like any answer the host could not store.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .context import Resource
from .models import Participant, ResultEntry, Results

#: The longest ``hold_for``, in seconds (a day); a longer one is refused (1.2; before, cut).
MAX_HOLD_SECONDS = 86_400
#: The longest ``error``, in bytes of UTF-8.
MAX_ERROR_BYTES = 16_384
#: The most resources one answer may report.
MAX_RESOURCES = 1_000
#: The longest resource ``kind`` and ``ref``, in characters (what the ledger's row holds).
MAX_KIND_CHARS = 120
MAX_REF_CHARS = 200
#: The most participants one answer may report, and the most entries one results table holds.
MAX_PARTICIPANTS = 1_000
MAX_ENTRIES = 100
#: The most dimensions one ``spent`` may name.
MAX_SPENT = 100


@dataclass(frozen=True)
class Envelope:
    """A classified answer."""

    ok: bool
    retry: bool = False
    error: str | None = None
    resources: tuple[Resource, ...] = ()
    hold_for: float = 0.0
    park: bool = False
    participants: tuple[Participant, ...] = ()
    results: Results | None = None
    #: What the game confirmed it made, ``{dimension: amount}`` (1.3); None: as reserved.
    spent: dict[str, float] | None = None
    #: Why the raw answer was reread (``exception``, ``timeout``, ``not a mapping``, ...).
    malformed: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: The exception a callable raised (``malformed == "exception"``), for the host's log.
    exception: BaseException | None = field(default=None, compare=False, repr=False)


def _retryable(reason: str, error: str) -> Envelope:
    return Envelope(ok=False, retry=True, error=error, malformed=reason)


def classify(answer: object) -> Envelope:
    """Read a raw answer into an :class:`Envelope`, never raising.

    Anything that does not clearly say ``ok`` reads as a retryable failure, naming why.
    """
    if not isinstance(answer, Mapping):
        return _retryable("not a mapping", f"answer is not a mapping: {type(answer).__name__}")
    if "ok" not in answer:
        return _retryable("missing ok", 'answer has no "ok"')
    ok = answer["ok"]
    if not isinstance(ok, bool):
        return _retryable("bad ok", f'"ok" must be true or false, not {ok!r}')
    if not ok:
        retry = answer.get("retry", True)
        error = answer.get("error")
        text = str(error) if error is not None else "failed without an error message"
        size = len(text.encode("utf-8", "replace"))
        if size > MAX_ERROR_BYTES:
            # Refused, not cut: the plugin's own failure stands, and its message is named
            # by its size and its opening words.
            text = (
                f'"error" is {size:,} bytes; the most is {MAX_ERROR_BYTES:,} '
                f"(it began: {text[:200]!r})"
            )
            return Envelope(
                ok=False,
                retry=retry if isinstance(retry, bool) else True,
                error=text,
                malformed="bad error",
            )
        return Envelope(ok=False, retry=retry if isinstance(retry, bool) else True, error=text)

    raw_resources = answer.get("resources") or []
    if not isinstance(raw_resources, list):
        return _retryable("bad resources", '"resources" must be a list')
    if len(raw_resources) > MAX_RESOURCES:
        return _retryable(
            "bad resources",
            f'"resources" lists {len(raw_resources):,}; the most one answer may report is '
            f"{MAX_RESOURCES:,}",
        )
    resources: list[Resource] = []
    for i, item in enumerate(raw_resources):
        resource, why = _resource(i, item)
        if resource is None:
            return _retryable("bad resources", why)
        resources.append(resource)

    hold = answer.get("hold_for", 0) or 0
    if (
        isinstance(hold, bool)
        or not isinstance(hold, (int, float))
        or math.isnan(hold)  # NaN passes "< 0" and would poison every later time sum
        or hold < 0
        or hold > MAX_HOLD_SECONDS
    ):
        return _retryable(
            "bad hold_for",
            f'"hold_for" must be a number of seconds from 0 to {MAX_HOLD_SECONDS:,}, not {hold!r}',
        )
    park = answer.get("park", False)
    if not isinstance(park, bool):
        return _retryable("bad park", '"park" must be true or false')
    participants, problem = _participants(answer.get("participants"))
    if problem is not None:
        return _retryable("bad participants", problem)
    results, problem = _results(answer.get("results"))
    if problem is not None:
        return _retryable("bad results", problem)
    spent, problem = _spent(answer.get("spent"))
    if problem is not None:
        return _retryable("bad spent", problem)
    return Envelope(
        ok=True,
        resources=tuple(resources),
        hold_for=float(hold),
        park=park,
        participants=participants,
        results=results,
        spent=spent,
    )


def _resource(i: int, item: object) -> tuple[Resource | None, str]:
    if (
        not isinstance(item, Mapping)
        or item.get("kind") in (None, "")
        or item.get("ref")
        in (
            None,
            "",
        )
    ):
        return None, f"resources[{i}] needs a kind and a ref"
    kind, ref = item["kind"], item["ref"]
    if not isinstance(kind, str) or len(kind) > MAX_KIND_CHARS:
        return None, f"resources[{i}].kind must be text of at most {MAX_KIND_CHARS} characters"
    # A whole number is a ref too (read as its text); anything else must be text.
    if isinstance(ref, bool) or not isinstance(ref, (str, int)):
        return None, f"resources[{i}].ref must be text or a whole number"
    ref = str(ref)
    if len(ref) > MAX_REF_CHARS:
        return None, (f"resources[{i}].ref is {len(ref):,} characters; the most is {MAX_REF_CHARS}")
    detail = {k: v for k, v in item.items() if k not in ("kind", "ref")}
    try:
        # What the ledger stores must read back as it was written: JSON, no NaN.
        json.dumps(detail, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return None, f"resources[{i}] detail is not JSON ({exc})"
    return Resource(kind=kind, ref=ref, detail=detail), ""


def _text(value: object, longest: int) -> bool:
    return isinstance(value, str) and 0 < len(value.strip()) and len(value) <= longest


def _participants(raw: object) -> tuple[tuple[Participant, ...], str | None]:
    if raw is None:
        return (), None
    if not isinstance(raw, list) or len(raw) > MAX_PARTICIPANTS:
        return (), f'"participants" must be a list of at most {MAX_PARTICIPANTS}'
    found = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not _text(item.get("name"), 100):
            return (), f"participants[{i}] needs a name of 1 to 100 characters"
        role = item.get("role")
        if role is not None and not _text(role, 50):
            return (), f"participants[{i}].role must be 1 to 50 characters"
        found.append(Participant(name=item["name"].strip(), role=role))
    return tuple(found), None


def _results(raw: object) -> tuple[Results | None, str | None]:
    if raw is None:
        return None, None
    if not isinstance(raw, Mapping) or not _text(raw.get("title"), 200):
        return None, '"results" needs a title of 1 to 200 characters'
    entries = raw.get("entries") or []
    if not isinstance(entries, list) or len(entries) > MAX_ENTRIES:
        return None, f'"results.entries" must be a list of at most {MAX_ENTRIES}'
    found = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or not _text(entry.get("name"), 100):
            return None, f"results.entries[{i}] needs a name of 1 to 100 characters"
        detail = entry.get("detail", "")
        if not isinstance(detail, str) or len(detail) > 200:
            return None, f"results.entries[{i}].detail must be text of at most 200 characters"
        rank = entry.get("rank")
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
            return None, f"results.entries[{i}].rank must be a whole number from 1"
        found.append(ResultEntry(name=entry["name"].strip(), detail=detail, rank=rank))
    return Results(title=raw["title"].strip(), entries=tuple(found)), None


def _spent(raw: object) -> tuple[dict[str, float] | None, str | None]:
    if raw is None:
        return None, None
    if not isinstance(raw, Mapping) or len(raw) > MAX_SPENT:
        return None, f'"spent" must be a mapping of at most {MAX_SPENT} dimensions to amounts'
    found: dict[str, float] = {}
    for dimension, amount in raw.items():
        if (
            not isinstance(dimension, str)
            or isinstance(amount, bool)
            or not isinstance(amount, (int, float))
            or not math.isfinite(amount)
            or amount < 0
        ):
            return None, f'"spent.{dimension}" must be a number from 0 up, not {amount!r}'
        found[dimension] = amount
    return found, None
