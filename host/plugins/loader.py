"""Plugin loading: a pipeline with one record per plugin.

find (entry points of group ``pageant``, sorted, nothing imported) -> load (every failure
wrapped and attributed) -> read ``PLUGIN_INFO`` -> check the contract range (before
registering) -> register -> ``check_pending()`` -> collect declarations, one plugin at a
time, so every error names the plugin that caused it.

A refusal never stops the host: the record says ``refused`` with a reason in the form
``dist[entry]: what is wrong; what was expected``, and the others load.
"""

from __future__ import annotations

import asyncio
import difflib
import importlib
import inspect
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from importlib.metadata import entry_points
from typing import Any

import pluggy
from pydantic import ValidationError

from pageant.errors import PageantError
from pageant.hookspecs import (
    CONTRACT_VERSION,
    PROJECT_NAME,
    PageantSpecs,
    PluginContext,
    PluginInfo,
)
from pageant.plugins import tracing
from pageant.plugins.notices import late_change_warning
from pageant.plugins.ranges import BadRange, parse_range
from pageant.plugins.registry import KINDS, Registry
from pageant.support.settings import Settings

log = logging.getLogger("pageant.plugins.loader")

ENTRY_POINT_GROUP = "pageant"
#: The owner reserved for the host's own built-ins.
CORE_OWNER = "core"
#: The hooks the host awaits; it calls every other hook as a plain function.
ASYNC_HOOKS = frozenset({"pageant_reconcile", "pageant_shutdown"})
#: The host's own plugins: loaded through the same pipeline as anyone's.
DEFAULT_PLUGINS: tuple[tuple[str, str], ...] = (
    ("core", "pageant.builtin_plugins.core:CorePlugin"),
)


@dataclass
class Candidate:
    """A plugin found but not yet imported."""

    name: str
    distribution: str
    version: str
    entry_point: str
    builtin: bool = False
    loaded: Any = None  # an object given directly (tests, embedding) instead of a path

    @property
    def label(self) -> str:
        return f"{self.distribution}[{self.name}]"


@dataclass
class PluginRecord:
    """What the host knows about one plugin; rendered by ``pageant plugins`` and the API."""

    name: str
    distribution: str
    version: str
    entry_point: str
    owner: str | None = None
    contract: str | None = None
    status: str = "refused"  # loaded | refused
    reason: str | None = None
    #: The last frames of the traceback behind a refusal, when an exception caused it.
    traceback: str | None = None
    plugin: Any = field(default=None, repr=False)
    #: The plugin's own settings (its ``PLUGIN_INFO`` settings model, filled), if it has any.
    settings: Any = field(default=None, repr=False)
    info: Any = field(default=None, repr=False)
    #: The lease targets its boot-time self-check dropped: ``{lease, target, reason}``.
    dropped: list[dict[str, str]] = field(default_factory=list)
    #: What its ``PLUGIN_INFO["check"]`` found wrong when the host started (contract 1.3).
    problems: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.distribution}[{self.name}]"

    def as_dict(self) -> dict[str, Any]:
        out = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("plugin", "settings", "info")
        }
        # JSON mode shows a SecretStr as asterisks: a secret never reaches a listing.
        out["settings"] = (
            self.settings.model_dump(mode="json") if self.settings is not None else None
        )
        return out


class Refusal(PageantError):
    """Raised inside the pipeline; becomes the record's reason.

    ``detail`` is what the server log shows beside it (a traceback's last frames).
    """

    code = "plugin_refused"

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail


def _why(exc: Exception) -> str:
    if isinstance(exc, Refusal):
        return str(exc)
    return f"raised {type(exc).__name__}: {exc} while loading; expected it to load without raising"


def find_candidates() -> list[Candidate]:
    """The host's built-ins, then every installed entry point in group ``pageant``, sorted."""
    from pageant import __version__

    found = [
        Candidate(name, "pageant", __version__, path, builtin=True)
        for name, path in DEFAULT_PLUGINS
    ]
    eps = sorted(
        entry_points(group=ENTRY_POINT_GROUP),
        key=lambda ep: ((ep.dist.name if ep.dist else ""), ep.name),
    )
    for ep in eps:
        dist = ep.dist
        found.append(
            Candidate(
                name=ep.name,
                distribution=dist.name if dist else "unknown",
                version=dist.version if dist else "0",
                entry_point=ep.value,
            )
        )
    return found


def candidate_for(obj: Any, name: str, distribution: str = "inline") -> Candidate:
    """A candidate for a plugin object handed over directly (tests, embedding)."""
    return Candidate(name, distribution, "0", f"<object {name}>", loaded=obj)


def _import_hint(candidate: Candidate, module_name: str, exc: Exception) -> str:
    """The expectation that fits what actually failed while importing the entry point."""
    if isinstance(exc, ModuleNotFoundError) and exc.name is not None:
        if module_name == exc.name or module_name.startswith(exc.name + "."):
            return (
                f"expected {candidate.entry_point!r} to name an importable module or class "
                f"(is {candidate.distribution} installed in this environment?)"
            )
        return (
            f"expected {exc.name!r}, which the plugin imports, to be installed "
            f"(a dependency missing from {candidate.distribution}'s requirements?)"
        )
    return "expected the plugin's module to import without raising"


def _load(candidate: Candidate) -> Any:
    if candidate.loaded is not None:
        obj = candidate.loaded
    else:
        module_name, _, attr = candidate.entry_point.partition(":")
        module_name = module_name.strip()
        try:
            obj = importlib.import_module(module_name)
        except Exception as exc:
            where = tracing.innermost_frame(exc)
            at = f" at {where}" if where else ""
            raise Refusal(
                f"cannot be imported ({type(exc).__name__}: {exc}{at}); "
                + _import_hint(candidate, module_name, exc),
                detail=tracing.last_frames(exc),
            ) from exc
        try:
            for part in filter(None, attr.strip().split(".")):
                obj = getattr(obj, part)
        except AttributeError as exc:
            raise Refusal(
                f"cannot be imported ({type(exc).__name__}: {exc}); "
                f"expected {candidate.entry_point!r} to name an importable module or class"
            ) from exc
    if inspect.isclass(obj):
        try:
            obj = obj()
        except Exception as exc:
            raise Refusal(
                f"cannot be instantiated ({type(exc).__name__}: {exc}); "
                "expected a class that takes no arguments"
            ) from exc
    return obj


def _read_info(obj: Any) -> PluginInfo:
    raw = getattr(obj, "PLUGIN_INFO", None)
    if raw is None:
        raise Refusal('has no PLUGIN_INFO; expected PLUGIN_INFO = {"owner": ..., "contract": ...}')
    try:
        return raw if isinstance(raw, PluginInfo) else PluginInfo.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'PLUGIN_INFO'}: {e['msg']}"
            for e in exc.errors()
        )
        raise Refusal(f"PLUGIN_INFO is invalid ({problems}); expected owner and contract") from exc


def _check_range(info: PluginInfo) -> None:
    try:
        contract_range = parse_range(info.contract)
    except BadRange as exc:
        raise Refusal(str(exc)) from exc
    if not contract_range.admits(CONTRACT_VERSION):
        raise Refusal(f"needs contract {info.contract}; this host implements {CONTRACT_VERSION}")


def _hook_arguments() -> dict[str, tuple[str, ...]]:
    """Each hook of the contract and the arguments the host passes it."""
    return {
        name: tuple(p for p in inspect.signature(fn).parameters if p != "self")
        for name, fn in inspect.getmembers(PageantSpecs, inspect.isfunction)
        if name.startswith("pageant_")
    }


#: Where a plugin's own setting ``NAME`` is read from the environment.
PLUGIN_ENV = "PAGEANT_PLUGIN_{owner}_{name}"


def plugin_env_name(owner: str, name: str) -> str:
    return PLUGIN_ENV.format(owner=owner.upper(), name=name.upper())


def _fill_settings(info: PluginInfo, settings: Settings, environ: Mapping[str, str]) -> Any:
    """The plugin's settings model filled from its ``[plugins.<owner>]`` table, overlaid by
    ``PAGEANT_PLUGIN_<OWNER>_<NAME>`` variables; a refusal names each field that fails."""
    model = info.settings
    if model is None:
        return None
    values = settings.plugin_table(info.owner)
    for name in model.model_fields:
        key = plugin_env_name(info.owner, name)
        if key in environ:
            values[name] = environ[key]
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        problems = []
        for e in exc.errors():
            name = ".".join(str(p) for p in e["loc"]) or "settings"
            first = str(e["loc"][0]) if e["loc"] else name
            problems.append(
                f"{name}: {e['msg']} (set {plugin_env_name(info.owner, first)}, or {first} "
                f"in [plugins.{info.owner}] of the settings file)"
            )
        raise Refusal(f"its settings are invalid: {'; '.join(problems)}") from None


def _check_hooks(pm: pluggy.PluginManager, obj: Any) -> None:
    """Refuse the hook mistakes pluggy accepts silently or reports unreadably.

    A misspelt hook, a hook without ``@hookimpl`` (pluggy never calls it), an argument the
    host does not pass, and a hook that is async where the host calls it plainly (its
    coroutine would never run) or plain where the host awaits it.
    """
    specs = _hook_arguments()
    problems = []
    for attr in sorted(dir(obj)):
        opts = pm.parse_hookimpl_opts(obj, attr)
        if opts is None:
            if attr in specs and inspect.isroutine(getattr(obj, attr, None)):
                problems.append(
                    f"{attr} is not marked with @hookimpl; expected "
                    "@pageant.hookimpl on every hook, or the host never calls it"
                )
            continue
        hook = opts.get("specname") or attr
        if hook not in specs:
            close = difflib.get_close_matches(hook, list(specs), n=1)
            problems.append(
                f"{hook} is not a pageant hook; expected "
                + (close[0] if close else "one of the hooks in pageant.hookspecs")
            )
            continue
        fn = getattr(obj, attr)
        wanted = specs[hook]
        unknown = [a for a in inspect.signature(fn).parameters if a not in wanted]
        if unknown:
            problems.append(
                f"{hook} takes {', '.join(unknown)}, which the host does not pass; "
                f"expected {hook}({', '.join(wanted)})"
            )
        if hook in ASYNC_HOOKS and not inspect.iscoroutinefunction(fn):
            problems.append(f"{hook} is a plain function; expected async def")
        elif hook not in ASYNC_HOOKS and inspect.iscoroutinefunction(fn):
            problems.append(f"{hook} is async def; expected a plain function")
    if problems:
        raise Refusal(" | ".join(problems))


def _format_validation(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


#: How long a cancelled ``pageant_shutdown`` is given to unwind, in seconds.
SHUTDOWN_UNWIND_SECONDS = 0.1


async def _awaited(function: Callable[..., Any]) -> Any:
    return await function()


class PluginManager:
    """Builds one pluggy manager, loads every candidate into it, and fills a registry."""

    def __init__(
        self, settings: Settings | None = None, environ: Mapping[str, str] | None = None
    ) -> None:
        self.settings = settings or Settings()
        self.environ = os.environ if environ is None else environ
        self.pm = pluggy.PluginManager(PROJECT_NAME)
        self.pm.add_hookspecs(PageantSpecs)
        self.records: list[PluginRecord] = []
        self.registry = Registry()
        #: owner -> the labels of every plugin claiming it (read before any registers).
        self.claims: dict[str, list[str]] = {}
        #: The plugins whose ``pageant_startup`` returned and that are not shut down yet.
        self.running: list[PluginRecord] = []

    # ── the pipeline ─────────────────────────────────────────────────────────

    def load(self, candidates: Iterable[Candidate]) -> list[PluginRecord]:
        # Every candidate is imported and its PLUGIN_INFO read before any is registered:
        # an owner claimed by two distributions refuses both, whichever sorts first, so an
        # impostor can never run an already-published event's steps.
        prepared = [self._prepare(candidate) for candidate in candidates]
        for candidate, _record, obj, info in prepared:
            if obj is not None and info is not None:
                self.claims.setdefault(info.owner, [])
                if candidate.label not in self.claims[info.owner]:
                    self.claims[info.owner].append(candidate.label)
        for candidate, record, obj, info in prepared:
            if obj is not None and info is not None:
                contested = self.contest(info.owner)
                if contested is not None:
                    record.reason = f"{candidate.label}: {contested}"
                else:
                    self._register_one(candidate, record, obj, info)
            self.records.append(record)
        return self.records

    def contest(self, owner: str) -> str | None:
        """Why ``owner`` belongs to nobody, when more than one distribution claims it."""
        claimants = self.claims.get(owner, [])
        distributions = {label.partition("[")[0] for label in claimants}
        if len(distributions) < 2:
            return None
        return (
            f'owner "{owner}" is claimed by {" and ".join(claimants)}; expected each owner '
            "to belong to one distribution (uninstall one of them and restart the host)"
        )

    def unavailable(self, action_id: str) -> str | None:
        """Why the steps of ``action_id`` must wait rather than run, or None.

        An action whose owner is contested belongs to no loaded plugin; running whatever
        answers to its id would run someone else's code, and refusing the step would fail
        a published event for a packaging mistake, so its steps wait until a restart
        finds one claimant.
        """
        owner = action_id.partition(".")[0]
        return self.contest(owner)

    def _prepare(
        self, candidate: Candidate
    ) -> tuple[Candidate, PluginRecord, Any, PluginInfo | None]:
        """Import the candidate and read its PLUGIN_INFO; a failure refuses it here."""
        record = PluginRecord(
            candidate.name, candidate.distribution, candidate.version, candidate.entry_point
        )
        try:
            obj = _load(candidate)
            info = _read_info(obj)
            record.owner, record.contract, record.info = info.owner, info.contract, info
            if info.owner == CORE_OWNER and not candidate.builtin:
                raise Refusal('claims the owner "core"; expected an owner of its own')
        except Exception as exc:  # a plugin's failure must never stop the host
            self._refuse(record, exc)
            return candidate, record, None, None
        return candidate, record, obj, info

    def _refuse(self, record: PluginRecord, exc: Exception) -> None:
        record.status, record.reason = "refused", f"{record.label}: {_why(exc)}"
        detail = exc.detail if isinstance(exc, Refusal) else tracing.last_frames(exc)
        record.traceback = detail
        if detail:
            log.error("plugin %s refused: %s\n%s", record.label, record.reason, detail)
        else:
            log.error("plugin %s refused: %s", record.label, record.reason)

    def _register_one(
        self, candidate: Candidate, record: PluginRecord, obj: Any, info: PluginInfo
    ) -> None:
        registered = False
        try:
            _check_range(info)
            record.settings = _fill_settings(info, self.settings, self.environ)
            _check_hooks(self.pm, obj)
            if self.pm.is_registered(obj):
                raise Refusal(
                    f"is the same plugin object as {self.pm.get_name(obj)}, already loaded; "
                    "expected each entry point to name a plugin of its own"
                )
            try:
                self.pm.register(obj, name=candidate.label)
            except ValueError as exc:
                raise Refusal(
                    f"cannot be registered ({exc}); expected one plugin per entry"
                ) from exc
            except pluggy.PluginValidationError as exc:
                raise Refusal(
                    f"has an invalid hook ({exc}); expected the signatures of pageant.hookspecs"
                ) from exc
            registered = True
            self._check_pending()
            self._collect(obj, info.owner, candidate.label)
        except Exception as exc:  # a plugin's failure must never stop the host
            if registered:
                self.pm.unregister(name=candidate.label)
            self._refuse(record, exc)
            return
        record.status, record.plugin = "loaded", obj

    def _check_pending(self) -> None:
        # A misspelt hook (``pageant_actionz``) registers silently. _check_hooks names it
        # first, more readably; this is the net for anything pluggy itself finds pending.
        # Refused plugins are unregistered at once, so anything pending belongs to the
        # plugin being loaded.
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise Refusal(f"{exc}; expected only the hooks of pageant.hookspecs") from exc

    def _collect(self, obj: Any, owner: str, label: str) -> None:
        """Call each declaration hook of this one plugin; add all of it or none of it."""
        problems: list[str] = []
        staged: list[tuple[str, str, Any]] = []
        seen: set[tuple[str, str]] = set()
        for hook_name, model, id_attr, key in KINDS:
            impls = [i for i in getattr(self.pm.hook, hook_name).get_hookimpls() if i.plugin is obj]
            for impl in impls:
                try:
                    declared = impl.function()
                except Exception as exc:
                    where = tracing.innermost_frame(exc, [tracing.plugin_root(obj)])
                    at = f" at {where}" if where else ""
                    log.error("plugin %s: %s() raised", label, hook_name, exc_info=exc)
                    problems.append(
                        f"{hook_name}() raised {type(exc).__name__}: {exc}{at}; "
                        "expected it to return a list"
                    )
                    continue
                if declared is None:
                    continue
                if not isinstance(declared, Sequence) or isinstance(declared, (str, bytes)):
                    problems.append(
                        f"{hook_name}() returned {type(declared).__name__}; expected a list"
                    )
                    continue
                for i, raw in enumerate(declared):
                    where = f"{hook_name}[{i}]"
                    ident = (
                        raw.get(id_attr) if isinstance(raw, dict) else getattr(raw, id_attr, None)
                    )
                    if ident:
                        where += f" ({ident})"
                    try:
                        # An instance is validated again: one built with model_construct
                        # skipped every check the contract makes.
                        data = raw.model_dump() if isinstance(raw, model) else raw
                        item = model.model_validate(data)
                    except ValidationError as exc:
                        problems.append(f"{where} is invalid: {_format_validation(exc)}")
                        continue
                    ident = getattr(item, id_attr)
                    if not ident.startswith(owner + "."):
                        problems.append(
                            f"{where}: id {ident!r} is outside the plugin's namespace; "
                            f"expected it to start with {owner + '.'!r}"
                        )
                        continue
                    other = self.registry.owner_of(key, ident)
                    if other is not None or (key, ident) in seen:
                        problems.append(
                            f"{where}: {ident!r} is declared by both {other or label} and {label}; "
                            "expected each id once"
                        )
                        continue
                    seen.add((key, ident))
                    staged.append((key, ident, item))
        problems.extend(self._check_references(staged))
        if problems:
            raise Refusal(" | ".join(problems))
        for key, ident, item in staged:
            self.registry.add(key, ident, item, label)

    def _check_references(self, staged: list[tuple[str, str, Any]]) -> list[str]:
        """An action's or a reading's param naming an option source must name one that exists."""
        sources = set(self.registry.option_sources) | {
            ident for key, ident, _ in staged if key == "option_sources"
        }
        problems = []
        hooks = {"actions": "pageant_actions", "readings": "pageant_readings"}
        for key, ident, item in staged:
            if key not in hooks:
                continue
            for param in item.params:
                if param.option_source and param.option_source not in sources:
                    problems.append(
                        f"{hooks[key]} ({ident}): param {param.name!r} names option source "
                        f"{param.option_source!r}, which nobody declares; "
                        "expected a declared source"
                    )
        return problems

    # ── after load ───────────────────────────────────────────────────────────

    def start(self, context_for: Callable[[PluginRecord], PluginContext]) -> set[str]:
        """Call every loaded plugin's ``pageant_startup`` with ``context_for(record)``.

        A plugin whose startup raises is refused and its declarations withdrawn; answers
        the labels refused.
        """
        refused: set[str] = set()
        for record in list(self.loaded()):
            for impl in self.pm.hook.pageant_startup.get_hookimpls():
                if impl.plugin is not record.plugin:
                    continue
                try:
                    impl.function(context=context_for(record))
                    self.running.append(record)
                except Exception as exc:
                    log.error("plugin %s failed at startup", record.label, exc_info=exc)
                    where = tracing.innermost_frame(exc, [tracing.plugin_root(record.plugin)])
                    at = f" at {where}" if where else ""
                    self.refuse_after_load(
                        record,
                        f"pageant_startup raised {type(exc).__name__}: {exc}{at}; "
                        "expected it to return",
                    )
                    refused.add(record.label)
                    break
        return refused

    async def shutdown(self, within: float) -> None:
        """Await every started plugin's ``pageant_shutdown`` at once, each for at most
        ``within`` seconds, then forget that they were started.

        A shutdown that raises is logged at ERROR with its traceback, one that has not
        finished in time is cancelled and a WARNING names it; neither holds the stop.
        """
        running, self.running = self.running, []
        calls: dict[asyncio.Task[Any], str] = {}
        for record in running:
            for impl in self.pm.hook.pageant_shutdown.get_hookimpls():
                if impl.plugin is record.plugin:
                    coro = _awaited(impl.function)
                    calls[asyncio.ensure_future(coro)] = record.label
        if not calls:
            return
        done, late = await asyncio.wait(calls, timeout=max(0.0, within))
        for task in late:
            task.cancel()
            log.warning(
                "plugin %s: pageant_shutdown did not finish within %g s; the host stops "
                "without waiting for it",
                calls[task],
                within,
                extra={"plugin": calls[task]},
            )
        for task in done:
            exc = task.exception()
            if exc is not None:
                log.error(
                    "plugin %s: pageant_shutdown raised %s: %s",
                    calls[task],
                    type(exc).__name__,
                    exc,
                    exc_info=exc,
                    extra={"plugin": calls[task]},
                )
        if late:
            # A moment for the cancelled calls to unwind; one that ignores its cancellation
            # is left behind rather than allowed to hold the stop.
            await asyncio.wait(late, timeout=SHUTDOWN_UNWIND_SECONDS)

    def refuse_after_load(self, record: PluginRecord, why: str) -> None:
        """A loaded plugin failed later (its startup hook raised): withdraw it."""
        self.registry.withdraw(record.label)
        if self.pm.is_registered(record.plugin):
            self.pm.unregister(record.plugin)
        record.status, record.reason = "refused", f"{record.label}: {why}"

    def code_roots(self) -> list[Any]:
        """Where each loaded plugin's code lives: what a traceback's plugin frame is in."""
        return [tracing.plugin_root(r.plugin) for r in self.loaded()]

    def raised_in(self, exc: BaseException) -> str | None:
        """The loaded plugin whose code raised ``exc`` (its innermost frame), or None: an
        announce leg raising inside ``core.announce`` is the leg's plugin's exception."""
        return tracing.innermost_owner(
            exc, [(r.label, tracing.plugin_root(r.plugin)) for r in self.loaded()]
        )

    def loaded(self) -> list[PluginRecord]:
        return [r for r in self.records if r.status == "loaded"]

    def late_change_warning(self, owner: str) -> str | None:
        """:func:`pageant.plugins.notices.late_change_warning` of ``owner``'s loaded plugin
        (None when no loaded plugin owns it)."""
        for record in self.loaded():
            if record.owner == owner:
                return late_change_warning(record, self.registry)
        return None


def load_plugins(
    extra: Sequence[Candidate] = (),
    *,
    discover: bool = True,
    settings: Settings | None = None,
    environ: Mapping[str, str] | None = None,
) -> PluginManager:
    """Build a new manager and load the built-ins, installed plugins and ``extra`` into it.

    ``settings`` (the settings file's plugin tables) and ``environ`` (default: the process
    environment) fill each plugin's own settings.
    """
    manager = PluginManager(settings, environ)
    candidates = (
        find_candidates()
        if discover
        else [Candidate(n, "pageant", "0", p, builtin=True) for n, p in DEFAULT_PLUGINS]
    )
    manager.load([*candidates, *extra])
    return manager


def plugin_listing(
    manager: PluginManager,
    *,
    include_refused: bool = True,
    unavailable: Callable[[str], str | None] | None = None,
) -> list[dict[str, Any]]:
    """The one rendering of the plugin list: ``pageant plugins``, ``serve``'s start, the
    console's plugins page and the API all use it. Each item carries ``warnings`` (what the
    operator should know of a loaded plugin, :mod:`pageant.plugins.notices`) and
    ``unavailable``: why the plugin says it cannot take steps now (not configured, its game
    down), as ``unavailable`` (``Host.plugin_unavailable``) answers for its owner."""
    items = []
    for record in manager.records:
        if not include_refused and record.status != "loaded":
            continue
        item = record.as_dict()
        late = late_change_warning(record, manager.registry)
        item["warnings"] = [late] if late is not None else []
        owner = record.owner if record.status == "loaded" else None
        item["unavailable"] = unavailable(owner) if owner and unavailable is not None else None
        items.append(item)
    return items
