"""A quorum: ``start_when`` on a spec, checked when it is saved.

::

    "start_when": {"reading": "openarena.players_online", "params": {"server": "ffa-1"},
                   "at_least": 4, "wait": "10m", "else": "announce_and_skip",
                   "legs": ["core.log"], "message": "The Frenzy is called off tonight"}

``reading`` is a reading a loaded plugin declares (``pageant_readings``); ``params`` its
params, each a value or a run param (``{"param": "server"}``: a fan-out's runs each read
their own server); ``at_least`` a number above 0; ``wait`` a duration from
:data:`MIN_WAIT_SECONDS` to :data:`MAX_WAIT_SECONDS`; ``else`` what a run does when the
wait ends short of the number (:data:`ELSE`). ``legs`` (required for
``announce_and_skip``, refused otherwise) and ``message`` (optional) say where the call-off
goes and what it says. What a run makes of it is :mod:`pageant.engine.start_when`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pageant.events.authoring import params as run_params
from pageant.events.authoring.countdown import MAX_LEGS, validate_legs
from pageant.gates.durations import format_after, parse_duration
from pageant.states import OrElse
from pageant.support.refusals import an_object, refuse_unknown, show

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry

START_WHEN_KEYS = ("reading", "params", "at_least", "wait", "else", "legs", "message")
#: What a run does when its wait ends short of the number (or the reading is unknown).
ELSE = tuple(OrElse)
MIN_WAIT_SECONDS = 60
#: Past a day the occurrence is another night's, not this one's late start.
MAX_WAIT_SECONDS = 86_400
MAX_AT_LEAST = 1_000_000
MAX_MESSAGE = 2000

START_WHEN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "a quorum: the run starts once the reading is at least at_least, waiting "
    'up to wait (a duration such as "10m", from 1m to 1d); else says what it does when the '
    "wait ends short (docs/schedules.md)",
    "properties": {
        "reading": {"type": "string"},
        "params": {"type": "object"},
        "at_least": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_AT_LEAST},
        "wait": {"type": "string", "pattern": r"^[0-9]{1,6}[smhd]$"},
        "else": {"enum": list(ELSE)},
        "legs": {"type": "array", "maxItems": MAX_LEGS, "items": {"type": "string"}},
        "message": {"type": "string", "minLength": 1, "maxLength": MAX_MESSAGE},
    },
    "required": ["reading", "at_least", "wait", "else"],
    "additionalProperties": False,
}


def validate_start_when(
    raw: Any,
    path: str,
    registry: Registry,
    errors: list[str],
    *,
    types: Mapping[str, str],
    declared: Mapping[str, dict[str, Any]],
) -> dict[str, Any] | None:
    """The normalised ``start_when`` (``wait`` in its canonical spelling), or None when
    absent or refused, each problem appended to ``errors`` prefixed by its path
    (``spec.start_when.at_least: ...``). ``types`` and ``declared``: the event's run params."""
    if raw is None:
        return None
    if (raw := an_object(raw, path, errors, "with reading, at_least, wait and else")) is None:
        return None
    problems: list[str] = []
    refuse_unknown(raw, START_WHEN_KEYS, path, problems)
    out = validate_quorum(
        raw, path, registry, problems, choices=ELSE, types=types, declared=declared
    )
    legs = _legs(raw.get("legs"), raw.get("else"), f"{path}.legs", registry, problems)
    message = raw.get("message")
    if message is not None and (
        not isinstance(message, str) or not message.strip() or len(message) > MAX_MESSAGE
    ):
        problems.append(
            f"{path}.message: expected a text of 1 to {MAX_MESSAGE} characters; got {show(message)}"
        )
    errors.extend(problems)
    if problems or out is None:
        return None
    if legs:
        out["legs"] = legs
    if message is not None:
        out["message"] = message
    return out


def validate_quorum(
    raw: dict[str, Any],
    path: str,
    registry: Registry,
    errors: list[str],
    *,
    choices: tuple[str, ...],
    types: Mapping[str, str],
    declared: Mapping[str, dict[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """The part a ``start_when`` and a reading gate share: ``reading``, ``params``,
    ``at_least``, ``wait`` and ``else`` (one of ``choices``), normalised; None when any is
    refused (each problem appended to ``errors``). Unknown keys are the caller's to refuse."""
    problems: list[str] = []
    reading = raw.get("reading")
    found = registry.readings.get(reading) if isinstance(reading, str) else None
    if found is None:
        known = ", ".join(sorted(registry.readings)) or "none"
        problems.append(
            f"{path}.reading: {show(reading)} is not a reading; expected one of {known}"
        )
    at_least = raw.get("at_least")
    if (
        isinstance(at_least, bool)
        or not isinstance(at_least, (int, float))
        or not 0 < at_least <= MAX_AT_LEAST
    ):
        problems.append(
            f"{path}.at_least: expected a number above 0 and at most {MAX_AT_LEAST}; "
            f"got {show(at_least)}"
        )
    wait = parse_duration(raw.get("wait"), least=MIN_WAIT_SECONDS, most=MAX_WAIT_SECONDS)
    if wait is None:
        problems.append(
            f'{path}.wait: expected a duration such as "10m" (a whole number of s, m, h or d) '
            f"from {format_after(MIN_WAIT_SECONDS)} to {format_after(MAX_WAIT_SECONDS)}; "
            f"got {show(raw.get('wait'))}"
        )
    otherwise = raw.get("else")
    if otherwise not in choices:
        problems.append(f"{path}.else: expected one of {', '.join(choices)}; got {show(otherwise)}")
    params = (
        _params(raw.get("params"), found, f"{path}.params", problems, types, declared or {})
        if found is not None
        else {}
    )
    errors.extend(problems)
    if problems or wait is None:
        return None
    return {
        "reading": reading,
        "params": params,
        "at_least": at_least,
        "wait": format_after(wait),
        "else": otherwise,
    }


def _legs(raw: Any, otherwise: Any, path: str, registry: Registry, errors: list[str]) -> list[str]:
    if otherwise != OrElse.ANNOUNCE_AND_SKIP:
        if raw is not None:
            errors.append(f'{path}: only "else": "announce_and_skip" announces; remove it')
        return []
    if not isinstance(raw, list) or not raw or len(raw) > MAX_LEGS:
        errors.append(
            f'{path}: "announce_and_skip" needs a list of 1 to {MAX_LEGS} announce legs '
            f'such as ["core.log"]; got {show(raw)}'
        )
        return []
    return validate_legs(raw, path, registry, errors)


def _params(
    raw: Any,
    reading: Any,
    path: str,
    errors: list[str],
    types: Mapping[str, str],
    declared: Mapping[str, dict[str, Any]],
) -> dict[str, Any]:
    raw = an_object({} if raw is None else raw, path, errors, "of the reading's params")
    if raw is None:
        return {}
    by_name = {param.name: param for param in reading.params}
    out: dict[str, Any] = {}
    for name, value in raw.items():
        param = by_name.get(name)
        if param is None:
            known = ", ".join(sorted(by_name)) or "none"
            errors.append(f"{path}: {reading.id} has no param {show(name)}; it takes {known}")
            continue
        if run_params.is_reference(value):
            if run_params.check_reference(value, param.type, types, f"{path}.{name}", errors):
                out[name] = {"param": value["param"]}
            continue
        ok, normalised, error = param.check(value)
        if not ok:
            errors.append(f"{path}.{name}: {error}")
            continue
        out[name] = normalised
    for name, param in by_name.items():
        if param.required and name not in raw:
            errors.append(f'{path}: "{name}" is required by {reading.id}')
    return out
