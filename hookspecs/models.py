"""Declaration models: the shapes a plugin's declaration hooks return.

Declaration hooks may return these models or plain dicts of the same shape; the host
validates either through these models, one plugin at a time, and refuses the plugin
naming every problem it found.

Every callable a declaration carries is ``async def`` except ``Action.cost``, a pure
synchronous function of the params, and ``AnnounceLeg.preview``, one of the announcement.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from importlib.resources import files
from typing import Any, Literal
from zoneinfo import available_timezones

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .link import LinkUse

#: One id segment: lowercase, starts with a letter.
SEGMENT = r"[a-z][a-z0-9_]*"
#: ``<owner>.<name>[.<name>...]``. ``\Z``, not ``$``: ``$`` also matches before a trailing
#: newline, which would let ``"wisps.summon\n"`` through as an id.
ID_PATTERN = re.compile(rf"^{SEGMENT}(?:\.{SEGMENT})+\Z")
OWNER_PATTERN = re.compile(rf"^{SEGMENT}\Z")

ParamType = Literal["string", "integer", "number", "boolean"]
Risk = Literal["notify", "inspect", "change", "irreversible"]
Reversible = Literal["full", "partial", "none"]
OnFailure = Literal["skip", "pause", "abort_run"]

#: The risks of the actions that change the world: what the ledger records before it
#: confirms, what the switchboard keeps off until an admin enables it, what only an admin may
#: add to a spec, and what waits while its plugin is down. One home; read it through
#: :func:`changes_world`. A tuple, in rising risk, so that messages naming it read in order.
WORLD_CHANGING_RISKS: tuple[Risk, ...] = ("change", "irreversible")


def changes_world(risk: str) -> bool:
    """True when an action of this ``risk`` changes the world (``change``, ``irreversible``)."""
    return risk in WORLD_CHANGING_RISKS


#: What a step does once it fails for good, when neither its action's declaration nor the
#: spec says: the more of the world an action can change, the less a run should go on past
#: it (a ``change`` falling back to ``skip`` would advance a run over a half-changed world).
ON_FAILURE_BY_RISK: dict[str, OnFailure] = {
    "notify": "skip",
    "inspect": "skip",
    "change": "pause",
    "irreversible": "abort_run",
}

MAX_BUDGET_MS = 600_000


def is_async_callable(fn: object) -> bool:
    """True for an ``async def`` function, bound method, or object with ``async __call__``."""
    if inspect.iscoroutinefunction(fn):
        return True
    if inspect.isclass(fn):
        # Calling a class builds an instance synchronously, even when its __call__ is async.
        return False
    call = getattr(fn, "__call__", None)  # noqa: B004 - a callable object's own __call__
    return call is not None and inspect.iscoroutinefunction(call)


#: Half of a surrogate pair: not text. Python keeps one from ``"\\ud800"`` in JSON and from
#: bytes that are not UTF-8 (a command line's, a header's); no database or game can store it.
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_literal(type_: str, value: Any) -> tuple[bool, Any, str]:
    """Check ``value`` against a declared param or variable type.

    Answers ``(ok, normalised value, error)``. An ``integer`` takes a whole number, and a
    number with no fractional part (``9.0``, as JSON Schema counts it) is normalised to the
    int ``9`` (contract 1.3; before, it was refused); it refuses ``True`` and ``9.5``. A
    ``number`` refuses booleans, NaN and infinity; a ``string`` must be a str of text (no
    half of a surrogate pair alone); a ``boolean`` a bool.
    """
    if type_ == "string":
        if isinstance(value, str):
            lone = None if value.isascii() else _SURROGATE.search(value)
            if lone is not None:
                return (
                    False,
                    None,
                    (
                        f"must be text; it holds U+{ord(lone.group()):04X}, half of a surrogate "
                        "pair alone (a byte that is not UTF-8)"
                    ),
                )
            return True, value, ""
        return False, None, "must be a string"
    if type_ == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return True, value, ""
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return True, int(value), ""
        return False, None, "must be an integer"
    if type_ == "number":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            # NaN and infinity are not JSON numbers: they would not survive a round trip.
            if not math.isfinite(value):
                return False, None, "must be a finite number"
            return True, value, ""
        return False, None, "must be a number"
    if type_ == "boolean":
        if isinstance(value, bool):
            return True, value, ""
        return False, None, "must be true or false"
    return False, None, f"has an unknown type {type_!r}"


def _check_id(value: str) -> str:
    if not isinstance(value, str) or not ID_PATTERN.match(value):
        raise ValueError(
            f"{value!r} is not an id; expected <owner>.<name>[.<name>...] "
            "with lowercase segments matching [a-z][a-z0-9_]*"
        )
    return value


class _Declaration(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class PluginInfo(_Declaration):
    """``PLUGIN_INFO``: read before the plugin is registered.

    ``owner`` is the first segment of every id the plugin declares; ``contract`` is the
    range of contract versions it was written against (``^1.0``, ``~1.2``, ``>=1.2 <2``).

    ``settings`` (contract 1.1) is a pydantic model class: the host fills it from
    ``PAGEANT_PLUGIN_<OWNER>_<FIELD>`` environment variables or the ``[plugins.<owner>]``
    table of the settings file, refuses the plugin naming the field when it does not
    validate, and hands the instance over as ``context.settings`` at startup. Fields typed
    ``SecretStr`` are never shown.

    ``observe`` (contract 1.1) is an ``async def`` answering a JSON-able picture of the
    world the plugin changes. Only ``pageant contract-check`` calls it: before and after
    every ``verify=True`` perform and every revert of nothing, so a dry run that writes is
    seen. The host never calls it.

    ``check`` (contract 1.3) is an ``async def`` taking nothing and answering a list of
    problems, each a sentence naming what is wrong and where to fix it (empty: none): a
    setting the game refuses (a wrong password for one of its servers), found by asking the
    game. The host awaits it once when it starts, after every plugin's startup, bounded to
    10 s (a raise or a timeout is itself a problem). A problem does not refuse the plugin,
    whose other parts keep working: it is shown on the plugin's record (``problems``, in
    ``pageant plugins``, which then exits 1, and ``GET /api/v1/admin/plugins``) and in the
    detail of ``/healthz`` (which stays 200: the host itself is healthy).
    """

    owner: str
    contract: str
    settings: type[BaseModel] | None = None
    observe: Callable[..., Any] | None = None
    #: Contract 1.3: the plugin uses the host's game link (:class:`LinkUse`).
    link: LinkUse | None = None
    #: Contract 1.3: an async check of the plugin's own settings, run once at start.
    check: Callable[..., Any] | None = None

    @model_validator(mode="after")
    def _observe_is_async(self) -> PluginInfo:
        if self.observe is not None and not is_async_callable(self.observe):
            raise ValueError("observe must be an async def function")
        if self.check is not None and not is_async_callable(self.check):
            raise ValueError("check must be an async def function")
        return self

    @field_validator("owner")
    @classmethod
    def _owner(cls, value: str) -> str:
        if not OWNER_PATTERN.match(value):
            raise ValueError(f"{value!r} is not an owner; expected one segment [a-z][a-z0-9_]*")
        return value


class Param(_Declaration):
    """One parameter of an action.

    ``example`` is required even on optional params and must type-check: it is what the
    kit passes to ``perform(verify=True)`` and what the docs show an author.

    Bounds (contract 1.3), each optional; the host checks a value against them when a spec
    is saved, exactly as it checks the type, and refuses it naming the param with the
    sentence of :meth:`bound_problem` (verify gives the same one):

    - ``minimum``, ``maximum``: the least and greatest value of an ``integer`` or ``number``
      (both inclusive).
    - ``min_length``, ``max_length``: the fewest and most characters of a ``string``.
    - ``pattern``: a regular expression (Python's ``re``) the **whole** of a ``string``
      must match (``[a-z]+``, not ``^[a-z]+$``; anchors are allowed and change nothing).
    - ``enum``: the only values allowed, each of the param's type.

    A bound of the wrong kind for the type (a ``minimum`` on a string), a minimum above its
    maximum, a pattern that does not compile, and an ``example`` outside its own bounds are
    invalid declarations. A ``{"param": name}`` reference in a spec is a run param, written
    out when the run reaches the step; the bounds hold for the value it is written out as.

    Example::

        Param(name="count", type="integer", required=True, description="How many.",
              example=4, minimum=1, maximum=50)
    """

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)
    type: ParamType
    required: bool = False
    description: str = Field(min_length=1)
    example: Any
    option_source: str | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    min_length: int | None = Field(default=None, ge=0, strict=True)
    max_length: int | None = Field(default=None, ge=0, strict=True)
    pattern: str | None = None
    enum: list[Any] | None = None

    @field_validator("minimum", "maximum", mode="before")
    @classmethod
    def _finite_number(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected a number; got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"expected a finite number; got {value!r}")
        return value

    @model_validator(mode="after")
    def _example_type_checks(self) -> Param:
        ok, _, error = check_literal(self.type, self.example)
        if not ok:
            raise ValueError(f"example {self.example!r} {error} (type {self.type})")
        if self.option_source is not None:
            _check_id(self.option_source)
        self._check_bounds()
        problem = self.bound_problem(self.example)
        if problem:
            raise ValueError(f"example {self.example!r} {problem}")
        return self

    def _check_bounds(self) -> None:
        numeric = self.type in ("integer", "number")
        for name in ("minimum", "maximum"):
            if getattr(self, name) is not None and not numeric:
                raise ValueError(f"{name} applies to integer and number params, not {self.type}")
        for name in ("min_length", "max_length", "pattern"):
            if getattr(self, name) is not None and self.type != "string":
                raise ValueError(f"{name} applies to string params, not {self.type}")
        low, high = self.minimum, self.maximum
        if low is not None and high is not None and low > high:
            raise ValueError(f"minimum {low} is above maximum {high}")
        shortest, longest = self.min_length, self.max_length
        if shortest is not None and longest is not None and shortest > longest:
            raise ValueError(f"min_length {shortest} is above max_length {longest}")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"pattern {self.pattern!r} does not compile: {exc}") from None
        if self.enum is not None:
            if not self.enum:
                raise ValueError("enum is empty; leave it out, or list the values allowed")
            for value in self.enum:
                ok, _, error = check_literal(self.type, value)
                if not ok:
                    raise ValueError(f"enum value {value!r} {error} (type {self.type})")

    @property
    def bounds(self) -> dict[str, Any]:
        """The bounds this param declares, by name (none: an empty dict)."""
        names = ("minimum", "maximum", "min_length", "max_length", "pattern", "enum")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}

    def bound_problem(self, value: Any) -> str | None:
        """Why ``value`` (already of the param's type, as :func:`check_literal` answers it)
        is outside the declared bounds, as the words that follow the param's name
        (``must be at most 86400``); None when it is inside them. The one sentence the
        host gives at save, at verify and at dispatch, and the kit for an example."""
        if self.enum is not None and value not in self.enum:
            return "must be one of " + ", ".join(json.dumps(v) for v in self.enum)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if self.minimum is not None and value < self.minimum:
                return f"must be at least {_number(self.minimum)}"
            if self.maximum is not None and value > self.maximum:
                return f"must be at most {_number(self.maximum)}"
        if isinstance(value, str):
            if self.min_length is not None and len(value) < self.min_length:
                return f"must be at least {self.min_length} characters long"
            if self.max_length is not None and len(value) > self.max_length:
                return f"must be at most {self.max_length} characters long"
            if self.pattern is not None and re.fullmatch(self.pattern, value) is None:
                return f"must match the pattern {json.dumps(self.pattern)}"
        return None

    def check(self, value: Any) -> tuple[bool, Any, str]:
        """``value`` against the param's type and bounds: ``(ok, normalised value, error)``,
        the error as the words that follow the param's name (:func:`check_literal`'s, then
        :meth:`bound_problem`'s)."""
        ok, normalised, error = check_literal(self.type, value)
        if not ok:
            return False, None, error
        problem = self.bound_problem(normalised)
        if problem:
            return False, None, problem
        return True, normalised, ""


def _number(value: int | float) -> str:
    """A bound as an author wrote it: ``86400``, ``0.5`` (never ``86400.0``)."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


class Action(_Declaration):
    """Something a step can do to the world.

    ``perform(ctx)`` and ``revert(ctx)`` are ``async def`` and answer an envelope (see
    :mod:`pageant.hookspecs.envelope`). ``cost(params)`` is synchronous and pure and
    answers ``{dimension: amount}``, reserved before ``perform`` and settled to the
    envelope's ``spent`` when it answers one (contract 1.3). ``revert`` is present exactly
    when ``reversible`` is not ``none``. ``version`` is bumped whenever a param changes
    meaning.

    ``on_failure`` (contract 1.2) is the step's disposition once it fails for good when the
    spec does not say: ``skip``, ``pause`` or ``abort_run``. It wins over the default of the
    action's risk (:attr:`default_on_failure`); an author's spec may still override it. A
    broadcast declares ``skip``, say, whatever its risk: a retried or paused broadcast is a
    second announcement to everyone.

    ``resources`` in ``perform``'s envelope are recorded (and reverted at the run's end)
    only for ``change`` and ``irreversible`` actions; a ``notify`` or ``inspect`` action
    that reports resources has them dropped, and the host logs that once per action.

    ``revert`` is called by the host's cleanup once per recorded resource (``ctx.resources``
    holds it), or with no resources at all when the perform's answer was lost (take back
    whatever was made under ``ctx.idempotency_key``). Reverting something that does not
    exist must succeed, and a revert may be repeated.

    A revert is final for its key (contract 1.2): after a revert under a key has answered
    ok, a ``perform`` under that key (a retry, or a call still on its way to the game) makes
    nothing and answers ok with no resources. Keep the keys you reverted where the game
    applies changes, or answer the revert with a failure until you know the key's last
    request has been applied or refused.
    """

    id: str
    label: str = Field(min_length=1)
    # strict: a bool or a numeric string is a mistake in a declaration, not a version.
    version: int = Field(default=1, ge=1, strict=True)
    risk: Risk
    reversible: Reversible = "none"
    budget_ms: int = Field(ge=1, le=MAX_BUDGET_MS, strict=True)
    params: list[Param] = Field(default_factory=list)
    description: str = ""
    cost: Callable[[dict[str, Any]], dict[str, float]] | None = None
    perform: Callable[..., Any]
    revert: Callable[..., Any] | None = None
    on_failure: OnFailure | None = None

    @property
    def default_on_failure(self) -> OnFailure:
        """What a step of this action does once it fails for good, unless its spec says:
        the declared ``on_failure``, else the default of its risk."""
        return self.on_failure or ON_FAILURE_BY_RISK[self.risk]

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return _check_id(value)

    @model_validator(mode="after")
    def _callables(self) -> Action:
        if not is_async_callable(self.perform):
            raise ValueError("perform must be an async def function")
        if self.revert is not None and not is_async_callable(self.revert):
            raise ValueError("revert must be an async def function")
        if self.cost is not None and (not callable(self.cost) or is_async_callable(self.cost)):
            raise ValueError("cost must be a plain (synchronous) function of the params")
        if self.reversible == "none" and self.revert is not None:
            raise ValueError('revert is declared but reversible is "none"')
        if self.reversible != "none" and self.revert is None:
            raise ValueError(f'reversible is "{self.reversible}" but no revert is declared')
        names = [p.name for p in self.params]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"param(s) declared twice: {', '.join(duplicates)}")
        return self


class Budget(_Declaration):
    """A budget dimension actions can spend against (``cost``) and caps can bound."""

    dimension: str
    label: str = Field(min_length=1)
    unit: str = Field(min_length=1)

    @field_validator("dimension")
    @classmethod
    def _id(cls, value: str) -> str:
        return _check_id(value)


def _takes(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` takes a parameter called ``name`` (or ``**kwargs``); False for a
    callable whose signature cannot be read."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


class Lease(_Declaration):
    """A borrowed value a plugin can set for a while and put back.

    ``read(target)`` answers the current value; ``apply(target, value)`` sets it and answers
    the baseline it replaced; ``restore(target, baseline)`` puts the baseline back.
    ``example`` (contract 1.1) is a value ``pageant contract-check`` applies to its own
    target (``"contract-check"``); without one it applies the value it read.

    ``apply`` may take a third parameter, ``until`` (contract 1.2): the host then passes
    the instant (an aware UTC ``datetime``) the lease ends at the latest, so the game can put
    the baseline back by itself should pageant be gone past it. An ``apply`` without it is
    called as before.

    ``apply`` and ``restore`` may take ``key`` (contract 1.3): the host then passes the
    lease's idempotency key, a string fixed for one borrowing (the ``core.lease`` step's
    key: the same on every retry, on the re-dispatch after a crash, and on the restore that
    gives it back). A game that received an ``apply`` whose answer was lost can answer the
    retry from what it remembers under the key instead of applying again (and answering the
    leased value as the baseline); a ``restore`` under a key may refuse a late ``apply``
    under it. ``apply(target, value, until, key)`` and ``restore(target, baseline, key)``;
    an ``apply`` or ``restore`` without ``key`` is called as before. The host reads which
    parameters each takes from its signature (by name, or ``**kwargs``).

    ``self_check`` (contract 1.2) names the targets the lease offers, each with a value to
    probe it with: ``{"xp_rate": "1.5"}``. When the host starts, before the engine's first
    tick, it reads each target, applies the probe, reads it back and restores the value it
    read. A target whose probe does not take (a value the game reads only at start, a
    latched setting), or whose calls fail, is dropped: logged as a WARNING naming it, shown
    dropped with the reason by ``pageant plugins`` and the plugins API, and refused by
    ``core.lease``. Only the targets named are offered; without ``self_check`` any target is.
    """

    id: str
    label: str = Field(min_length=1)
    example: Any = None
    read: Callable[..., Any]
    apply: Callable[..., Any]
    restore: Callable[..., Any]
    self_check: dict[str, str] | None = None

    @property
    def apply_takes_until(self) -> bool:
        """Whether ``apply`` takes ``until`` (contract 1.2): a parameter of that name, or
        ``**kwargs``."""
        try:
            parameters = inspect.signature(self.apply).parameters.values()
        except (TypeError, ValueError):  # a callable whose signature cannot be read
            return False
        return any(p.name == "until" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)

    async def apply_until(self, target: str, value: Any, until: datetime) -> Any:
        """Call ``apply`` as its signature asks: with ``until`` when it takes it."""
        if self.apply_takes_until:
            return await self.apply(target, value, until=until)
        return await self.apply(target, value)

    async def apply_keyed(self, target: str, value: Any, until: datetime, key: str) -> Any:
        """Call ``apply`` as its signature asks: with ``until`` and ``key`` when it takes
        them (contract 1.2 and 1.3), each by name."""
        more: dict[str, Any] = {}
        if self.apply_takes_until:
            more["until"] = until
        if _takes(self.apply, "key"):
            more["key"] = key
        return await self.apply(target, value, **more)

    async def restore_keyed(self, target: str, baseline: Any, key: str) -> Any:
        """Call ``restore`` as its signature asks: with ``key`` when it takes it (contract
        1.3)."""
        if _takes(self.restore, "key"):
            return await self.restore(target, baseline, key=key)
        return await self.restore(target, baseline)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return _check_id(value)

    @model_validator(mode="after")
    def _callables(self) -> Lease:
        for name in ("read", "apply", "restore"):
            if not is_async_callable(getattr(self, name)):
                raise ValueError(f"{name} must be an async def function")
        return self


@cache
def _iana_zones() -> frozenset[str]:
    """The IANA zone names, as the tzdata distribution lists them (never ``localtime`` or a
    path of the system's zone directory)."""
    try:
        return frozenset(files("tzdata").joinpath("zones").read_text(encoding="utf-8").split())
    except (ModuleNotFoundError, FileNotFoundError):  # pragma: no cover - tzdata is a dependency
        return frozenset(available_timezones() - {"localtime"})


class OptionItem(_Declaration):
    """One value an option source offers.

    ``zone`` (contract 1.4, optional): the IANA time zone of what the value names, such as
    a server's ``Europe/Berlin``. A fan-out over the value's param with ``"stagger":
    "local"`` starts that value's runs at the schedule's wall time in this zone."""

    value: str | int | float | bool
    label: str
    zone: str | None = None

    @field_validator("zone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        if value is not None and value not in _iana_zones():
            raise ValueError(
                f"zone {value!r} is not an IANA time zone name (such as Europe/Berlin)"
            )
        return value


class OptionSource(_Declaration):
    """Values a param may take, resolved live (``resolve()`` answers ``[{value, label}]``,
    each with an optional ``zone``)."""

    id: str
    label: str = Field(min_length=1)
    resolve: Callable[..., Any]

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return _check_id(value)

    @model_validator(mode="after")
    def _callables(self) -> OptionSource:
        if not is_async_callable(self.resolve):
            raise ValueError("resolve must be an async def function")
        return self


def _word(value: Any) -> str:
    """A payload value as a sentence shows it: text as it is, a truth as yes or no."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


class TriggerVariable(_Declaration):
    """A variable a trigger's payload carries and a gate's condition may test."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)
    type: ParamType
    description: str = Field(min_length=1)
    example: Any

    @model_validator(mode="after")
    def _example_type_checks(self) -> TriggerVariable:
        ok, _, error = check_literal(self.type, self.example)
        if not ok:
            raise ValueError(f"example {self.example!r} {error} (type {self.type})")
        return self


class Trigger(_Declaration):
    """Something that happens in the game, fired through the emit path or ``/fire``.

    ``sentence`` (contract 1.3) is how the run log says one firing, a template naming the
    payload's variables in braces: ``"{killer} fragged {victim} with {means}"``. Every name
    in it must be a declared variable (no format specs, no conversions; ``{{`` is a brace).
    A counted firing's log line then reads *Major-4abc fragged Sarge-4abd with a rocket*
    rather than the bare values its gate's condition named. A firing whose payload lacks a
    variable the template names (or carries it empty) is said as if there were no template:
    a sentence never shows a blank or a placeholder.
    """

    id: str
    label: str = Field(min_length=1)
    variables: list[TriggerVariable] = Field(default_factory=list)
    sentence: str | None = Field(None, min_length=1, max_length=200)

    @model_validator(mode="after")
    def _sentence_names_variables(self) -> Trigger:
        if self.sentence is None:
            return self
        declared = {v.name for v in self.variables}
        try:
            fields = list(string.Formatter().parse(self.sentence))
        except ValueError as exc:
            raise ValueError(f"sentence {self.sentence!r}: {exc}") from None
        for _, name, spec, conversion in fields:
            if name is None:
                continue
            if spec or conversion:
                raise ValueError(
                    f"sentence {self.sentence!r}: {{{name}}} may not carry a format spec "
                    "or a conversion; write the bare {name}"
                )
            if name not in declared:
                raise ValueError(
                    f"sentence {self.sentence!r} names {{{name}}}, which is not a variable "
                    f"of this trigger; expected one of {', '.join(sorted(declared)) or 'none'}"
                )
        return self

    def say(self, payload: Mapping[str, Any]) -> str | None:
        """This firing in words, from ``sentence``; None without one, or when the payload
        lacks a value the template names."""
        if self.sentence is None:
            return None
        named = {name for _, name, _, _ in string.Formatter().parse(self.sentence) if name}
        if any(payload.get(name) in (None, "") for name in named):
            return None
        words = {v.name: _word(payload.get(v.name)) for v in self.variables}
        return self.sentence.format_map(words)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return _check_id(value)

    @model_validator(mode="after")
    def _unique_variables(self) -> Trigger:
        names = [v.name for v in self.variables]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"variable(s) declared twice: {', '.join(duplicates)}")
        return self


class AnnounceLeg(_Declaration):
    """A place an announcement can go: ``send(message, ctx)`` is ``async def``.

    ``preview(announcement)`` (optional, contract 1.5) is a plain synchronous function of an
    :class:`~pageant.hookspecs.Announcement` that answers, as a JSON-ready mapping, what
    ``send`` would deliver of it: a chat service's payload, an email's subject and text. It
    must be pure (no I/O, no settings, nothing sent): the host calls it to show staff an
    event's announcements before a run sends them (``announce-preview``). Build the answer
    with the function ``send`` builds its payload with, so the two cannot drift.
    """

    id: str
    label: str = Field(min_length=1)
    send: Callable[..., Any]
    preview: Callable[..., Mapping[str, Any]] | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return _check_id(value)

    @model_validator(mode="after")
    def _callables(self) -> AnnounceLeg:
        if not is_async_callable(self.send):
            raise ValueError("send must be an async def function")
        if self.preview is not None and (
            not callable(self.preview) or is_async_callable(self.preview)
        ):
            raise ValueError("preview must be a plain (synchronous) function of the announcement")
        return self


class Unknown:
    """The type of :data:`UNKNOWN`: what a reading answers when it cannot tell."""

    _only: Unknown | None = None

    def __new__(cls) -> Unknown:
        if cls._only is None:
            cls._only = super().__new__(cls)
        return cls._only

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False


#: A reading's answer when the plugin cannot read the game now (the server is down, it did
#: not answer): never a number guessed. An exception or a timeout is taken as this too.
UNKNOWN = Unknown()


class Reading(_Declaration):
    """A number the plugin can read from the game now, such as the players online.

    ``read(params, ctx)`` is ``async def``; ``params`` are the declared params' values
    (checked against ``params`` as an action's are), ``ctx`` a
    :class:`~pageant.hookspecs.ReadContext`. It answers an ``int`` or ``float`` (not a
    bool), or :data:`UNKNOWN` when it cannot tell.
    The host calls it at most once per ``reading_interval_seconds`` for the same params and
    shares the answer among everyone asking (a start condition, a gate), bounded to
    ``budget_ms``; a raise, a timeout or any other answer counts as unknown and is logged.
    ``unit`` is the plural noun a sentence puts after the number ("6 players online").

    Example::

        Reading(
            id="mygame.players_online",
            label="Players online",
            unit="players online",
            params=[
                Param(
                    name="server",
                    type="string",
                    required=True,
                    description="Which server.",
                    example="eu-1",
                    option_source="mygame.options.servers",
                )
            ],
            read=players_online,
        )

    .. versionadded:: 1.5
    """

    id: str
    label: str = Field(min_length=1)
    unit: str = Field(min_length=1, max_length=60)
    params: list[Param] = Field(default_factory=list)
    description: str = ""
    budget_ms: int = Field(default=5000, ge=1, le=60_000, strict=True)
    read: Callable[..., Any]

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return _check_id(value)

    @model_validator(mode="after")
    def _callables(self) -> Reading:
        if not is_async_callable(self.read):
            raise ValueError("read must be an async def function")
        names = [p.name for p in self.params]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"param(s) declared twice: {', '.join(duplicates)}")
        return self


def reading_value(answer: Any) -> float | int | Unknown:
    """What a reading's answer counts as: the number, or :data:`UNKNOWN` for anything that
    is not a finite ``int`` or ``float`` (a bool, a string, None, NaN)."""
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return UNKNOWN
    if isinstance(answer, float) and not math.isfinite(answer):
        return UNKNOWN
    return answer


# ── what an envelope may report besides resources ──────────────────────────────


@dataclass(frozen=True)
class Participant:
    """Someone who took part, reported in an envelope's ``participants``.

    .. versionadded:: 1.1
    """

    name: str
    role: str | None = None


@dataclass(frozen=True)
class ResultEntry:
    """One line of a results table: who, how they placed (optional), and what they did."""

    name: str
    detail: str
    rank: int | None = None


@dataclass(frozen=True)
class Results:
    """How a phase ended, reported in an envelope's ``results``: shown on the run console
    and, for a public event, on its public page.

    .. versionadded:: 1.1
    """

    title: str
    entries: tuple[ResultEntry, ...] = ()
