"""The served OpenAPI document is the truth: schemathesis drives every operation of the real
app (real plugins, a real SQLite database, a real HTTP server) from the document, with every
check on, and finds no server error and no answer the document does not describe.

A fixed seed and a bounded number of examples per operation keep it repeatable and short;
path parameters are real ids (an event with a run whose step ran, a series, a trigger), so
the generated requests reach past the 404s into the handlers.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from aiohttp import web
from hypothesis import HealthCheck, settings

from pageant import __version__
from pageant.access.tokens import create_token
from pageant.api.app import all_routes, make_app
from pageant.api.openapi import document
from pageant.db.engine import create_engine
from pageant.db.migrate import upgrade
from pageant.engine import Engine
from pageant.hosting import Host
from pageant.plugins.loader import load_plugins
from pageant.support.clock import SystemClock
from pageant.support.settings import Settings
from tests.conftest import FIGURES

#: Examples per operation: the suite's budget (about a minute on two cores).
EXAMPLES = 25
SEED = 20270301
#: Answers the generated traffic must have produced, operation by operation (see below).
SEEN: dict[str, int] = {}


class Server:
    """The real app over a real host, served on a free port of 127.0.0.1 in a thread."""

    def __init__(self, tmp: Path) -> None:
        self.url_db = f"sqlite+aiosqlite:///{tmp / 'schemathesis.db'}"
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.ids: dict[str, Any] = {}
        self.token = ""
        self.port = 0
        self.failed: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._start())
        except BaseException as exc:  # told to the test, which fails loudly with it
            self.failed = exc
            self.ready.set()
            return
        self.ready.set()
        self.loop.run_forever()

    async def _start(self) -> None:
        engine = create_engine(self.url_db)
        await upgrade(engine)
        await engine.dispose()
        self.host = Host(Settings(database_url=self.url_db), clock=SystemClock())
        self.token = await create_token(
            self.host.db, role="admin", name="schemathesis", now=SystemClock().now()
        )
        self.app = make_app(self.host, run_engine=False)
        self.runner = web.AppRunner(self.app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # a started site has its server
        await self._seed()

    async def _seed(self) -> None:
        import aiohttp

        base = f"http://127.0.0.1:{self.port}/api/v1/admin"
        headers = {"Authorization": f"Bearer {self.token}"}
        spec = {
            "schedule": {"kind": "manual"},
            "phases": [
                {
                    "key": "main",
                    "label": "Main",
                    "steps": [{"action": "core.wait", "params": {"seconds": 1}}],
                }
            ],
        }
        async with aiohttp.ClientSession(headers=headers) as http:

            async def send(method: str, path: str, body: Any = None) -> Any:
                async with http.request(method, base + path, json=body) as response:
                    assert response.status < 300, (path, await response.text())
                    return await response.json()

            series = await send("POST", "/series", {"title": "Probe", "visibility": "public"})
            night = {"kind": "weekly", "days": ["friday"], "start": "18:00", "end": "23:00"}
            blackout = await send(
                "POST", "/blackouts", {"slug": "probe", "name": "Probe", "periods": [night]}
            )
            event = await send(
                "POST",
                "/events",
                {"title": "Probe", "spec": spec, "visibility": "public", "series_id": series["id"]},
            )
            await send("POST", f"/events/{event['id']}/publish")
            run = await send("POST", f"/events/{event['id']}/runs")
            await Engine(self.host).tick()
            # This app runs no engine (its /healthz says so); the one above ran one tick.
            self.host.attach_engine(None)
            console = await send("GET", f"/runs/{run['id']}")
        seeded = {
            "id": event["id"],
            "number": 1,
            "run_id": run["id"],
            "step_id": console["steps"][0]["id"],
            # A game's trigger: core's are the host's alone (403 whatever the body).
            "trigger_id": next(
                t for t in sorted(self.host.registry.triggers) if not t.startswith("core.")
            ),
            "slug": event["slug"],
            "source_id": sorted(self.host.registry.option_sources)[0],
            "action_id": "core.announce",
        }
        # The ids are fixed before the server exists (the operations are collected from
        # the document at import), so a fresh database must number exactly so.
        assert series["id"] == event["id"] == blackout["blackout"]["id"]
        assert seeded == IDS, seeded

    def start(self) -> None:
        self.thread.start()
        assert self.ready.wait(60), "the server did not start"
        if self.failed is not None:
            raise RuntimeError("the server did not start") from self.failed

    def stop(self) -> None:
        async def _stop() -> None:
            await self.runner.cleanup()

        asyncio.run_coroutine_threadsafe(_stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        # Closed, or its self-pipe (a pair of unix sockets) is left for the garbage collector
        # to find in whatever test runs then, which the warnings filter makes an error.
        self.loop.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = Server(tmp_path_factory.mktemp("schemathesis"))
    running.start()
    try:
        yield running
    finally:
        running.stop()


REGISTRY = load_plugins().registry
#: Real ids for every path parameter: what :meth:`Server._seed` makes in a fresh database.
IDS = {
    "id": 1,
    "number": 1,
    "run_id": 1,
    "step_id": 1,
    "trigger_id": next(t for t in sorted(REGISTRY.triggers) if not t.startswith("core.")),
    "slug": "probe",
    "source_id": sorted(REGISTRY.option_sources)[0],
    "action_id": "core.announce",
}
CONFIG = schemathesis.Config.from_dict(
    {
        "seed": SEED,
        "parameters": {f"path.{name}": value for name, value in IDS.items()},
        "generation": {
            "max-examples": EXAMPLES,
            "deterministic": True,
            # No example database: a run replays nothing an earlier one stored, so the seed
            # alone decides what is sent.
            "database": "none",
            "mode": "all",
            # The token is the test's to give (an admin's, below), not a parameter to mutate;
            # the ignored_auth check still sends each operation without it.
            "with-security-parameters": False,
            # Unknown query parameters are ignored, as HTTP APIs commonly do.
            "allow-extra-parameters": True,
        },
        "suppress-health-check": ["too_slow", "filter_too_much", "data_too_large"],
        # Every check, as shipped - but a schema-valid request may be a 400 here: the API
        # checks what a schema cannot say (a cursor is one it issued, a window's end is
        # after its start, a zone is an IANA zone, a spec's actions are registered). And a
        # revalidated GET sent an If-None-Match naming its tag (or *) accepts it with a 304.
        "checks": {
            "enabled": True,
            "positive_data_acceptance": {
                "expected-statuses": ["2xx", "304", "400", "401", "403", "404", "409"]
            },
            # A body past 1 MiB is refused as too large (413) before it is read.
            "negative_data_rejection": {
                "expected-statuses": [
                    "400",
                    "401",
                    "403",
                    "404",
                    "405",
                    "406",
                    "409",
                    "413",
                    "415",
                    "422",
                ]
            },
        },
    }
)
#: The document the server serves (a test below proves the two are one), read in-process so
#: that pytest can collect one test per operation.
DOCUMENT = document(all_routes(), __version__, REGISTRY)
schema = schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG)


def test_the_tested_document_is_the_served_one(server: Server) -> None:
    import json
    import urllib.request

    url = f"http://127.0.0.1:{server.port}/api/v1/openapi.json"
    with urllib.request.urlopen(url, timeout=10) as response:
        assert json.load(response) == json.loads(json.dumps(DOCUMENT))


@pytest.fixture
def drives(request: pytest.FixtureRequest) -> Iterator[None]:
    """After an operation's test (every example of it): it sent at least one request of its
    own operation. Kept per test, so it holds however the tests are spread over processes."""
    label = request.node.operation_label
    before = SEEN.get(label, 0)
    yield
    assert SEEN.get(label, 0) > before, f"{label} was never sent"


@schema.parametrize()
# ``drives`` is set up once for all of an operation's examples, as meant: it counts them.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_operation_answers_as_documented(case: Any, server: Server, drives: None) -> None:
    response = case.call_and_validate(
        base_url=f"http://127.0.0.1:{server.port}",
        headers={"Authorization": f"Bearer {server.token}"},
    )
    key = f"{case.operation.method.upper()} {case.operation.path}"
    SEEN[key] = SEEN.get(key, 0) + 1
    assert response.status_code < 500


def test_every_documented_operation_has_its_test(request: pytest.FixtureRequest) -> None:
    """Each operation of the document has a test above (none was dropped by schemathesis),
    and each of those tests asserts that it sent its operation at least once."""
    operations = {
        f"{method.upper()} {path}"
        for path, methods in DOCUMENT["paths"].items()
        for method in methods
    }
    tested = {
        label
        for item in request.session.items
        if (label := getattr(item, "operation_label", None)) is not None
    }
    assert tested == operations, operations ^ tested
    FIGURES.append(
        f"schemathesis: {len(tested)} operations, each driven "
        f"(seed {SEED}, at most {EXAMPLES} examples per operation and phase)"
    )
