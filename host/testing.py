"""``pageant.testing``: what a plugin's own tests need, and nothing of pageant's internals.

A pytest plugin (entry point ``pytest11``; installed with ``pip install pageant[testing]``,
which brings pytest, pytest-asyncio and pytest-aiohttp, or named with ``-p
pageant.testing``). Its fixtures:

- ``pageant_plugins`` — which plugins the host loads: override it with a list of plugin
  objects and/or installed entry-point or distribution names. The default is every
  installed plugin, as ``serve`` would load them.
- ``pageant_kit`` — a :class:`Kit`: a real host over a throwaway SQLite database with
  exactly those plugins (and the built-ins), a virtual clock, its plugins started, one
  token per role.
- ``pageant_client`` — the real aiohttp app of that host under pytest-aiohttp's test
  client; ``pageant_kit.headers("admin")`` authorizes a request.

And :class:`FakeAgent`: a game-link agent that syncs with that app over the real route
(scriptable answers, delays, drops, restarts), so a link plugin's tests need no game.

Everything a test drives goes through the same code ``serve`` runs: the loader, the spec
validator, the engine's ticks, the emit path, the envelope's classification.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import tempfile
import uuid
import warnings
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pageant.hookspecs import ActionContext, Envelope, RunInfo
from pageant.hookspecs.envelope import classify
from pageant.hookspecs.models import WORLD_CHANGING_RISKS, changes_world
from pageant.hosting import Host
from pageant.link.agent import FakeAgent
from pageant.plugins.calls import run_with_envelope
from pageant.plugins.loader import Candidate, candidate_for, find_candidates
from pageant.support.clock import FakeClock
from pageant.support.settings import Settings

if TYPE_CHECKING:
    from pageant.engine import Engine

__all__ = [
    "FakeAgent",
    "Kit",
    "UnrecordedResourcesWarning",
    "assert_contract_holds",
    "assert_failed",
    "assert_log_kinds",
    "assert_ok",
    "contract_check",
    "kit_host",
]

#: Where the virtual clock starts: a fixed instant, so a test reads the same every day.
EPOCH = datetime(2030, 1, 4, 19, 0, tzinfo=UTC)
#: Run statuses after which nothing more happens.
ENDED = ("completed", "failed", "cancelled")
#: The actor the kit's own controls and publishes are logged as.
ACTOR = "admin:pageant-testing"


class UnrecordedResourcesWarning(UserWarning):
    """A ``notify`` or ``inspect`` action answered ``resources``, which the host never
    records: in a run they would be dropped, and never given back."""


def _candidates(plugins: Iterable[Any]) -> list[Candidate]:
    """Plugin objects and installed names (entry point or distribution) as candidates."""
    installed = [c for c in find_candidates() if not c.builtin]
    chosen: list[Candidate] = []
    for i, plugin in enumerate(plugins):
        if isinstance(plugin, str):
            wanted = plugin.lower().replace("_", "-")
            found = [
                c
                for c in installed
                if wanted in (c.name.lower().replace("_", "-"), c.distribution.lower())
            ]
            if not found:
                names = ", ".join(c.label for c in installed) or "none"
                raise LookupError(f"no installed plugin is named {plugin!r}; installed: {names}")
            chosen.extend(found)
        else:
            name = getattr(plugin, "__name__", None) or type(plugin).__name__.lower()
            chosen.append(candidate_for(plugin, name.rpartition(".")[2] or f"plugin{i}"))
    return chosen


class Kit:
    """A started host over a throwaway database, driven the way ``serve`` drives it."""

    def __init__(
        self, host: Host, clock: FakeClock, tokens: dict[str, str], engine: Engine
    ) -> None:
        self.host = host
        #: The host's engine, ticked by hand (:meth:`run`), never started as a loop.
        self.engine = engine
        self.clock = clock
        #: One bearer token per role (``admin``, ``editor``, ``moderator``, ``game``).
        self.tokens = tokens
        #: What ``perform`` calls wrote with ``ctx.services.write_log``: ``(kind, detail)``
        #: (only the run log's own kinds, as in a run: ``announce`` for a leg's message).
        self.logged: list[tuple[str, dict[str, Any]]] = []

    # ── plugins ──────────────────────────────────────────────────────────────

    @property
    def registry(self) -> Any:
        """What the loaded plugins declared (``registry.actions["wisps.summon"]``, ...)."""
        return self.host.registry

    def refused(self) -> dict[str, str]:
        """Each refused plugin's label and reason (a test asserts it is empty)."""
        return {r.label: r.reason or "" for r in self.host.plugins.records if r.status != "loaded"}

    def headers(self, role: str = "admin") -> dict[str, str]:
        """The ``Authorization`` header of ``role``'s token."""
        return {"Authorization": f"Bearer {self.tokens[role]}"}

    async def link_token(self, servers: Sequence[str], owners: Sequence[str] = ()) -> str:
        """A game token bound to ``servers`` on the game link (and, when given, to the
        ``owners`` whose triggers it may fire): what a :class:`FakeAgent` syncs with."""
        from pageant.access.tokens import create_token

        return await create_token(
            self.host.db,
            role="game",
            name="fake-agent",
            now=self.clock.now(),
            servers=list(servers),
            owners=list(owners) or None,
        )

    async def enable(
        self, action_id: str, *, caps: Mapping[str, int | None] | None = None
    ) -> dict[str, Any]:
        """Enable ``action_id`` on the switchboard (and set its per-run ``caps``), as an
        admin would: a ``change`` or ``irreversible`` action is off until enabled, and a run
        refuses its steps (``step.refused``, code ``disabled``) until then."""
        from pageant.switchboard import board

        async with self.host.db.begin() as conn:
            return await board.set_action(
                conn,
                self.host.registry,
                action_id,
                enabled=True,
                caps=dict(caps) if caps is not None else None,
                actor=ACTOR,
                now=self.clock.now(),
            )

    # ── one call at a time ───────────────────────────────────────────────────

    async def perform(
        self,
        action_id: str,
        params: Mapping[str, Any],
        *,
        verify: bool = False,
        idempotency_key: str | None = None,
        revert: bool = False,
    ) -> Envelope:
        """Call ``action_id``'s ``perform`` (or ``revert``) as the engine does and answer the
        classified envelope: a raise, a timeout past ``budget_ms``, a non-mapping answer and
        a missing ``ok`` all come back as ``Envelope(ok=False, retry=True)``."""
        action = self.host.registry.actions.get(action_id)
        if action is None:
            raise LookupError(f"no loaded plugin declares the action {action_id!r}")
        fn = action.revert if revert else action.perform
        if fn is None:
            raise LookupError(f"{action_id} declares no revert")
        context = ActionContext(
            params=dict(params),
            idempotency_key=idempotency_key or uuid.uuid4().hex,
            run=RunInfo(id=0, scope="", definition_id=0, slug="pageant-testing"),
            verify=verify,
            deadline=self.clock.now() + timedelta(milliseconds=action.budget_ms),
            services=_Services(self),
        )
        envelope = await run_with_envelope(fn, context, timeout=action.budget_ms / 1000)
        if not revert and envelope.resources and not changes_world(action.risk):
            warnings.warn(
                UnrecordedResourcesWarning(
                    f"{action_id} (risk {action.risk}) answered resources "
                    f"{', '.join(f'{r.kind}:{r.ref}' for r in envelope.resources)}; the host "
                    f"records only {' and '.join(WORLD_CHANGING_RISKS)} actions' resources, "
                    "so in a run these would be dropped and never given back"
                ),
                stacklevel=2,
            )
        return envelope

    async def perform_after_revert(
        self, action_id: str, params: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> Envelope:
        """Revert ``action_id`` under a key, then perform it under the same key, as a retry
        or a call still on its way lands after the host's revert; answers the perform's
        envelope after asserting the rule of contract 1.2: **a revert is final for its
        key**, so that perform answers ok with no resources (and should leave the game as
        it was: compare it yourself). A revert that fails fails the assertion too."""
        key = idempotency_key or uuid.uuid4().hex
        reverted = await self.perform(action_id, params, idempotency_key=key, revert=True)
        assert reverted.ok, f"expected the revert to answer ok, got: {reverted.error}"
        answer = await self.perform(action_id, params, idempotency_key=key)
        assert answer.ok, (
            f"expected a perform after its key's revert to answer ok, got: {answer.error}"
        )
        made = [f"{r.kind} {r.ref}" for r in answer.resources]
        assert not made, (
            f"a perform after its key's revert made {made}; a revert is final for its key"
        )
        return answer

    async def resolve(self, source_id: str) -> list[dict[str, Any]]:
        """An option source's values, checked as the catalog route checks them."""
        from pageant.plugins.options import resolve_options

        source = self.host.registry.option_sources.get(source_id)
        if source is None:
            raise LookupError(f"no loaded plugin declares the option source {source_id!r}")
        answer = await resolve_options(source, self.host.plugins.code_roots())
        if not answer["ok"]:
            raise AssertionError(answer["reason"])
        return answer["items"]

    async def read(self, reading_id: str, params: Mapping[str, Any]) -> Any:
        """A reading's value for ``params`` as the host reads it (bounded by its budget; a
        raise, a timeout or a non-number is ``UNKNOWN``), read afresh every call."""
        if reading_id not in self.host.registry.readings:
            raise LookupError(f"no loaded plugin declares the reading {reading_id!r}")
        answer = await self.host.readings.read_now(reading_id, dict(params))
        return answer.value

    async def fire(self, trigger_id: str, payload: Mapping[str, Any]) -> dict[str, int]:
        """Fire a trigger through the emit path that feeds phase gates, as a game server
        does: answers ``{gates_matched, gates_closed}``; a payload that does not fit raises
        ``Invalid``, and one of core's lifecycle triggers ``Forbidden`` (the host alone
        fires those)."""
        from pageant.gates.firers import check_outside_firing

        check_outside_firing(trigger_id)
        return await self.host.emit(trigger_id, dict(payload), actor="game:pageant-testing")

    # ── whole runs ───────────────────────────────────────────────────────────

    async def publish(self, event_spec: Mapping[str, Any], *, title: str = "Test event") -> int:
        """Validate ``event_spec`` against the loaded plugins, create and publish it; its id."""
        from pageant.events import definitions

        raw = {"schedule": {"kind": "manual"}, **event_spec}
        async with self.host.db.begin() as conn:
            return await definitions.create_and_publish(
                conn,
                self.host.registry,
                raw,
                title=title,
                now=self.clock.now(),
                actor=ACTOR,
                horizon_days=self.host.settings.horizon_days,
            )

    async def run_to_completion(
        self,
        event_spec: Mapping[str, Any],
        *,
        firings: Sequence[tuple[str, Mapping[str, Any]]] = (),
        confirm_parked: bool = True,
        max_ticks: int = 200,
    ) -> dict[str, Any]:
        """Publish ``event_spec``, start a run and drive it until it ends or nothing more
        can move it; answer its run console (``{run, steps, gate, log}``).

        Time is virtual: a wait, a backoff or a timed gate moves the kit's clock to the
        instant it ends. A gate waiting on a trigger gets the next of ``firings`` (each
        ``(trigger_id, payload)``, fired in order). A parked step is confirmed unless
        ``confirm_parked`` is false. A run that pauses, or waits on a gate with no firing
        left, is answered as it stands: the test asserts on the console.
        """
        from pageant.runs import controls
        from pageant.runs.console import console
        from pageant.runs.create import start_now

        definition_id = await self.publish(event_spec)
        run_id, _ = await start_now(self.host, definition_id, scope="", actor=ACTOR)
        pending = list(firings)
        for _ in range(max_ticks):
            await self.engine.tick()
            view = await console(self.host, run_id)
            run = view["run"]
            if run["status"] in ENDED or run["status"] == "paused":
                return view
            waiting = run["waiting_on"]
            if waiting is None:
                continue
            reason = waiting["reason"]
            if reason == "gate" and pending:
                trigger_id, payload = pending.pop(0)
                await self.fire(trigger_id, payload)
            elif reason == "parked" and confirm_parked:
                await controls.confirm(self.host, run_id, waiting["step_id"], actor=ACTOR)
            elif waiting.get("until") is not None:
                self.clock.set(max(self.clock.now(), _instant(waiting["until"])))
            else:
                return view
        raise AssertionError(f"run {run_id} did not end within {max_ticks} ticks")

    async def console(self, run_id: int) -> dict[str, Any]:
        """A run's console, as ``GET /api/v1/admin/runs/{run_id}`` answers it."""
        from pageant.runs.console import console

        return await console(self.host, run_id)


class _Services:
    """``ctx.services`` of a ``Kit.perform`` call: outside any run, so the log lines it
    writes are kept on the kit (``kit.logged``); ``post_json`` posts for real, through the
    same code as a step's."""

    def __init__(self, kit: Kit) -> None:
        from pageant.engine.step_services import StepServices

        self._kit = kit
        self._real = StepServices(
            kit.host, run_id=0, step_id=0, phase="", session=kit.engine.http_session
        )
        self.registry = kit.host.registry
        self.settings = kit.host.settings
        self.run_id = None
        self.step_id = None
        # Outside a run there is no phase; the contract types it as a string.
        self.phase = ""

    async def write_log(self, kind: str, detail: dict[str, Any]) -> None:
        from pageant.db.log_kinds import LogKind

        # As a step's services do: a kind outside the run log's enumeration is refused.
        self._kit.logged.append((LogKind(kind).value, dict(detail)))

    async def post_json(self, url: str, body: Any) -> Any:
        return await self._real.post_json(url, body)

    # What core's chat legs use besides the contract's services: the same as a step's.
    async def http_session(self) -> Any:
        return await self._real.http_session()

    def now(self) -> datetime:
        return self._real.now()

    async def sleep(self, seconds: float) -> None:
        await self._real.sleep(seconds)


def _instant(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


# ── assertions ────────────────────────────────────────────────────────────────


def assert_ok(envelope: Envelope | Mapping[str, Any]) -> Envelope:
    """Assert an answer reads as success (a raw mapping is classified first); answers it."""
    found = envelope if isinstance(envelope, Envelope) else classify(envelope)
    assert found.ok, f"expected ok, got a failure: {found.error} (malformed: {found.malformed})"
    return found


def assert_failed(
    envelope: Envelope | Mapping[str, Any],
    *,
    retry: bool | None = None,
    error: str | None = None,
) -> Envelope:
    """Assert an answer reads as a failure, optionally its ``retry`` and a part of its
    error; answers the classified envelope."""
    found = envelope if isinstance(envelope, Envelope) else classify(envelope)
    assert not found.ok, "expected a failure, got ok"
    if retry is not None:
        assert found.retry is retry, f"expected retry={retry}, got retry={found.retry}"
    if error is not None:
        assert error in (found.error or ""), f"expected {error!r} in the error {found.error!r}"
    return found


def assert_log_kinds(console: Mapping[str, Any], expected: Sequence[str]) -> None:
    """Assert the run log holds ``expected`` kinds in this order (others may come between)."""
    kinds = [line["kind"] for line in console["log"]]
    at = 0
    for kind in expected:
        try:
            at = kinds.index(kind, at) + 1
        except ValueError:
            raise AssertionError(
                f"expected the log kinds {list(expected)} in order; missing {kind!r} "
                f"after position {at}; the log: {kinds}"
            ) from None


# ── the contract ──────────────────────────────────────────────────────────────


def contract_check(*args: str) -> tuple[int, dict[str, Any]]:
    """Run ``pageant contract-check --json ARGS`` in a process of its own, as a plugin's CI
    runs it; answers the exit code (0 pass, 1 violations, 2 usage) and the JSON report (for
    a usage error, ``{"usage": <what it printed>}``)."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [sys.executable, "-m", "pageant.cli", "contract-check", "--json", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if done.returncode == 2 or not done.stdout.strip():
        return done.returncode, {"usage": done.stderr}
    return done.returncode, json.loads(done.stdout)


def assert_contract_holds(*args: str) -> None:
    """Run ``pageant contract-check ARGS`` in a process of its own and fail, with the whole
    report it prints (each manifest difference on a line of its own: ``changed
    actions/mygame.spawn/risk: "notify" -> "change"``), unless it passes: what a plugin's
    own test of its contract asserts."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [sys.executable, "-m", "pageant.cli", "contract-check", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if done.returncode != 0:
        # Raised, not asserted: pytest shows the message whole, where an assert's would be
        # cut to a few lines.
        raise AssertionError(
            f"pageant contract-check exited {done.returncode}:\n{done.stdout}{done.stderr}"
        )


# ── the host ──────────────────────────────────────────────────────────────────

_TEMPLATES: dict[str, Path] = {}


async def _migrated_copy(folder: Path) -> str:
    """A migrated SQLite file in ``folder``: one migration per process, copied after."""
    from pageant.db.engine import create_engine
    from pageant.db.migrate import upgrade

    template = _TEMPLATES.get("sqlite")
    if template is None or not template.exists():
        scratch = tempfile.mkdtemp(prefix="pageant-testing-")
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        template = Path(scratch) / "template.db"
        engine = create_engine(f"sqlite+aiosqlite:///{template}")
        try:
            await upgrade(engine)
        finally:
            await engine.dispose()
        _TEMPLATES["sqlite"] = template
    target = folder / "pageant.db"
    shutil.copyfile(template, target)
    return f"sqlite+aiosqlite:///{target}"


@contextlib.asynccontextmanager
async def kit_host(
    plugins: Iterable[Any] | None = None,
    *,
    folder: Path | None = None,
    settings: Mapping[str, Any] | None = None,
    plugin_tables: Mapping[str, Any] | None = None,
) -> AsyncIterator[Kit]:
    """A :class:`Kit` for the block: ``plugins`` are plugin objects and installed names
    (None: every installed plugin); ``folder`` holds the database (a temporary one if
    None); ``settings`` are host settings to change; ``plugin_tables`` are the plugins'
    own settings as the settings file's ``[plugins.<owner>]`` tables would give them
    (``{"openarena": {"servers": [...]}}``)."""
    from pageant.access.tokens import ROLES, create_token
    from pageant.engine import Engine

    with contextlib.ExitStack() as stack:
        if folder is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        url = await _migrated_copy(folder)
        clock = FakeClock(EPOCH)
        host = Host(
            Settings(database_url=url, **dict(settings or {})).with_plugin_tables(
                plugin_tables or {}
            ),
            plugins=_candidates(plugins) if plugins is not None else (),
            discover=plugins is None,
            clock=clock,
        )
        engine = Engine(host)
        try:
            await host.start_plugins()
            tokens = {
                role: await create_token(host.db, role=role, name=f"test-{role}", now=clock.now())
                for role in ROLES
            }
            yield Kit(host, clock, tokens, engine)
        finally:
            await engine.stop()
            await host.close()


# ── the pytest plugin ─────────────────────────────────────────────────────────

try:
    import pytest
except ModuleNotFoundError:  # a plain install has no pytest: the kit is still importable
    pytest = None  # type: ignore[assignment]  # no pytest: the kit's fixtures are simply absent

if pytest is not None:

    @pytest.fixture
    def pageant_plugins() -> Sequence[Any] | None:
        """Which plugins ``pageant_kit`` loads; override it in a plugin's ``conftest.py``.

        A list of plugin objects and installed entry-point or distribution names, or None
        for every installed plugin.
        """
        return None

    @pytest.fixture
    async def pageant_kit(
        pageant_plugins: Sequence[Any] | None, tmp_path: Path
    ) -> AsyncIterator[Kit]:
        """A :class:`Kit` over a throwaway SQLite database in ``tmp_path``."""
        async with kit_host(pageant_plugins, folder=tmp_path) as kit:
            yield kit

    @pytest.fixture
    async def pageant_client(pageant_kit: Kit, aiohttp_client: Any) -> Any:
        """The host's real aiohttp app under pytest-aiohttp's test client (engine not
        started: ``pageant_kit.run_to_completion`` ticks it)."""
        from pageant.api.app import make_app

        return await aiohttp_client(make_app(pageant_kit.host, run_engine=False))
