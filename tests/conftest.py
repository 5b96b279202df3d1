"""Shared fixtures: a real database on both dialects, a real host, the real app.

The ``db`` fixture is parametrized over SQLite and MariaDB. MariaDB runs when
``PAGEANT_TEST_MYSQL_URL`` is set (``mysql+asyncmy://root@127.0.0.1:3306/test``); the
suite then works in a database of its own, created beside the named one and dropped at the
end, so two runs against one server never meet. With ``CI`` set and no URL, the session
fails at once: CI never silently skips MariaDB.

Each dialect's database is migrated once per session and its tables are emptied before
every test (a migration per test is too slow on MariaDB).
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import delete, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from pageant.db.engine import create_engine
from pageant.db.migrate import upgrade
from pageant.db.tables import ALL_TABLES
from pageant.support.clock import FakeClock
from pageant.support.settings import Settings

#: Fixtures more than one folder uses: the ledger's games and their hosts.
pytest_plugins = ["tests.ledger.games"]

MYSQL_ENV = "PAGEANT_TEST_MYSQL_URL"
DIALECTS = ["sqlite", "mariadb"] if os.environ.get(MYSQL_ENV) else ["sqlite"]


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("CI") and not os.environ.get(MYSQL_ENV):
        raise pytest.UsageError(
            f"CI is set but {MYSQL_ENV} is not: the suite must run on MariaDB too"
        )


@pytest.fixture(scope="session", autouse=True)
def _own_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every ``pageant serve`` a test starts notes itself in a state folder of the session's
    (pageant.cli.running), never in the user's own ``~/.local/state``."""
    before = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))
    yield
    if before is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = before


@pytest.fixture(autouse=True)
def _test_state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: Any) -> None:
    """And one of each test's: a host another test noted is not one this test's commands
    are told about."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


def pytest_report_header(config: pytest.Config) -> str:
    if os.environ.get(MYSQL_ENV):
        return "pageant: database tests run on sqlite and mariadb"
    return f"pageant: {MYSQL_ENV} is not set - database tests run on sqlite ONLY"


def _mysql_server_url() -> Any:
    return make_url(os.environ[MYSQL_ENV])


@pytest.fixture(scope="session")
def database_urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One migrated database per dialect for the whole session."""
    urls = {"sqlite": f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('db') / 'pageant.db'}"}
    mysql_db = None
    if "mariadb" in DIALECTS:
        server = _mysql_server_url()
        mysql_db = f"{server.database or 'pageant'}_t{os.getpid()}_{secrets.token_hex(3)}"
        urls["mariadb"] = server.set(database=mysql_db).render_as_string(hide_password=False)

    async def _prepare() -> None:
        if mysql_db is not None:
            admin = create_engine(_mysql_server_url().render_as_string(hide_password=False))
            try:
                async with admin.begin() as conn:
                    await conn.execute(
                        text(
                            f"CREATE DATABASE `{mysql_db}` "
                            "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
                        )
                    )
            finally:
                await admin.dispose()
        for url in urls.values():
            engine = create_engine(url)
            try:
                await upgrade(engine)
            finally:
                await engine.dispose()

    asyncio.run(_prepare())
    yield urls

    async def _drop() -> None:
        admin = create_engine(_mysql_server_url().render_as_string(hide_password=False))
        try:
            async with admin.begin() as conn:
                await conn.execute(text(f"DROP DATABASE IF EXISTS `{mysql_db}`"))
        finally:
            await admin.dispose()

    if mysql_db is not None:
        asyncio.run(_drop())


@pytest.fixture(params=DIALECTS)
def dialect(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def db_url(dialect: str, database_urls: dict[str, str]) -> str:
    return database_urls[dialect]


async def empty_tables(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        for table in ALL_TABLES:
            await conn.execute(delete(table))


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[AsyncEngine]:
    """A migrated, empty database on each dialect, and its engine (closed afterwards)."""
    engine = create_engine(db_url)
    await empty_tables(engine)
    try:
        yield engine
    finally:
        await engine.dispose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2027, 3, 1, 12, 0, tzinfo=UTC))


@pytest.fixture
def settings(db_url: str) -> Settings:
    """The defaults, but every run console read afresh: the tests move the engine on between
    two reads within milliseconds of real time, and say what they expect of the second.
    Readers sharing a console kept for ``console_max_age_ms`` have tests of their own
    (``tests/api/test_recent_consoles.py``)."""
    return Settings(database_url=db_url, console_max_age_ms=0)


@pytest.fixture
async def host(settings: Settings, db: AsyncEngine, clock: FakeClock) -> AsyncIterator[Any]:
    """A real host: built-ins and every installed plugin (wisps) through the real loader."""
    from pageant.hosting import Host

    h = Host(settings, clock=clock, db=db)
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
async def client(host: Any, aiohttp_client: Any) -> Any:
    """The real aiohttp app over ``host`` (the engine task is not started)."""
    from pageant.api.app import make_app

    return await aiohttp_client(make_app(host, run_engine=False))


@pytest.fixture
async def crier_client(
    settings: Settings,
    db: AsyncEngine,
    clock: FakeClock,
    aiohttp_client: Any,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Any]:
    """The real app over a host that also discovers, through its entry point, a plugin whose
    announce legs offer previews (``tests/fixture_plugins/crier.py``)."""
    from pageant.api.app import make_app
    from pageant.hosting import Host
    from tests.fixture_plugins import fake_site, source

    with fake_site(tmp_path / "site", monkeypatch) as site:
        site.install(
            "pageant-crier", {"crier": "pageant_crier"}, {"pageant_crier": source("crier")}
        )
        h = Host(settings, clock=clock, db=db)
        try:
            yield await aiohttp_client(make_app(h, run_engine=False))
        finally:
            await h.close()


@pytest.fixture
async def tokens(db: AsyncEngine, clock: FakeClock) -> dict[str, str]:
    """One bearer token per role."""
    from pageant.access.tokens import ROLES, create_token

    return {
        role: await create_token(db, role=role, name=f"test-{role}", now=clock.now())
        for role in ROLES
    }


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def cancel_swallowed_once(
    watch: asyncio.Task[Any], entered: asyncio.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancel ``watch`` once it is inside a call that swallows the cancel (as a database
    driver may while giving its connection back), and assert that it still ends."""
    await entered.wait()
    watch.cancel()
    done, _ = await asyncio.wait({watch}, timeout=2)
    try:
        assert done == {watch}, "the watch went on after it was cancelled"
        assert watch.cancelled()
    finally:
        monkeypatch.undo()  # a watch still going next sleeps, and a second cancel ends it
        watch.cancel()


# ── the runner (engine) ──────────────────────────────────────────────────────


@pytest.fixture
def probe() -> Any:
    """A scripted stand-in for a game plugin (see ``tests.factories.Probe``)."""
    from tests.factories import Probe

    return Probe()


@pytest.fixture
async def probe_host(settings: Settings, db: AsyncEngine, clock: FakeClock, probe: Any) -> Any:
    """A real host with the built-ins and ``probe`` (no installed plugins)."""
    from tests.factories import make_host

    h = make_host(settings, db, clock, [probe])
    try:
        yield h
    finally:
        await h.close()


async def _engine_of(host: Any) -> AsyncIterator[Any]:
    from pageant.engine import Engine

    e = Engine(host)
    try:
        yield e
    finally:
        await e.stop()


@pytest.fixture
async def engine(probe_host: Any) -> AsyncIterator[Any]:
    """The engine of ``probe_host``, not started (tests call ``tick``); stopped afterwards."""
    async for e in _engine_of(probe_host):
        yield e


@pytest.fixture
async def host_engine(host: Any) -> AsyncIterator[Any]:
    """The engine of the plain ``host`` (no plugins but the built-in ones), attached but not
    started (tests call ``tick``); stopped afterwards. A folder or module whose tests run on
    ``host`` names it ``engine`` with a one-line fixture."""
    async for e in _engine_of(host):
        yield e


#: Figures a test wants on the record (the proofs' counts), printed at the end of the run.
FIGURES: list[str] = []
#: The figures the run's reports carried, in the process that prints the summary.
_RECORDED: list[str] = []
_FIGURE = "figure"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[Any]:
    # A figure rides on the report of the test phase that appended it: under pytest-xdist
    # the test ran in a worker, and only its reports reach the process that prints. The
    # tests append to ``tests.conftest.FIGURES``, which pytest may have loaded under another
    # name than this file's, so the list is the one the tests import; it is emptied here.
    import tests.conftest as shared

    report = yield
    report.user_properties.extend((_FIGURE, line) for line in shared.FIGURES)
    shared.FIGURES.clear()
    return report


def pytest_runtest_logreport(report: Any) -> None:
    _RECORDED.extend(value for name, value in report.user_properties if name == _FIGURE)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _RECORDED:
        terminalreporter.section("figures")
        for line in _RECORDED:
            terminalreporter.write_line(line)
