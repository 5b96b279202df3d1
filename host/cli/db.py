"""``pageant db``: create, migrate or stamp the database schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from pageant.cli.common import run, settings_options
from pageant.support.settings import Settings


@click.group()
def db() -> None:
    """The database schema."""


@db.command("upgrade")
@settings_options
def db_upgrade(settings: Settings) -> None:
    """Create or migrate the database schema to the newest revision."""
    from pageant.db.engine import is_relative_sqlite, shown_url, sqlite_file
    from pageant.db.migrate import upgrade

    # A relative URL makes its file wherever the command runs: say where it went.
    path = sqlite_file(settings.database_url)
    created = (
        path is not None
        and is_relative_sqlite(settings.database_url)
        and not Path(path).expanduser().exists()
    )

    async def _go() -> None:
        engine = await _open(settings.database_url, create=True)
        try:
            before = await _placed(engine)
            state = await upgrade(engine)
        finally:
            await engine.dispose()
        if before == state.current:
            click.echo(f"schema already at {state.current}")
        else:
            click.echo(f"schema upgraded from {before or 'empty'} to {state.current}")
        if created:
            click.echo(f"created the SQLite database {shown_url(settings.database_url)}")

    run(_go())
    if created and path is not None:
        _say_second(Path(path).expanduser().absolute())


def _say_second(made: Path) -> None:
    """Say on standard error when the file just made is a second database: a host of this
    user was started in another folder, on a file of its own (:mod:`pageant.cli.running`)."""
    from pageant.cli.running import host_elsewhere

    elsewhere = host_elsewhere(made)
    if elsewhere is not None:
        uses = "uses" if elsewhere.running else "used"
        where = "started in" if elsewhere.running else "last ran in"
        click.echo(
            f"note: {made} is a second, empty database; the host you {where} "
            f"{elsewhere.folder} {uses} {elsewhere.database}",
            err=True,
        )


@db.command("stamp")
@click.argument("revision", default="head")
@settings_options
def db_stamp(settings: Settings, revision: str) -> None:
    """Record REVISION (default: head) as the schema's revision without migrating: for
    tables that already match it but lack Alembic's record (restored, or made by hand)."""
    from pageant.db.migrate import known_revisions, stamp

    if revision != "head" and revision not in known_revisions():
        raise click.UsageError(
            f"unknown revision {revision!r}; this pageant knows: "
            + ", ".join(sorted(known_revisions()))
        )

    async def _go() -> None:
        engine = await _open(settings.database_url)
        try:
            state = await stamp(engine, revision)
        finally:
            await engine.dispose()
        click.echo(f"schema stamped at {state.current}")

    run(_go())


async def _open(url: str, *, create: bool = False) -> Any:
    """An engine on ``url`` that has answered once, or an operator error saying why not.
    Only ``create`` may make a SQLite file that is not there yet."""
    from pageant.cli.operator import check_sqlite_exists, check_sqlite_folder, unreachable
    from pageant.db.engine import MARIADB_STATEMENT_SECONDS, create_engine

    if create:
        check_sqlite_folder(url)
    else:
        check_sqlite_exists(url)
    # Creating or migrating the schema may run long statements: no statement bound.
    engine = create_engine(url, statement_seconds=None if create else MARIADB_STATEMENT_SECONDS)
    try:
        async with engine.connect() as conn:
            await conn.rollback()
    except Exception as exc:
        await engine.dispose()
        raise unreachable(url, exc) from exc
    return engine


async def _placed(engine: Any) -> str | None:
    """The schema's current revision, refusing one the migrations cannot start from."""
    from pageant.cli.operator import OperatorError, newer_schema
    from pageant.db.migrate import known_revisions, schema_state, tables_of_pageant

    current = (await schema_state(engine)).current
    if current is None:
        ours = await tables_of_pageant(engine)
        if ours:
            raise OperatorError(
                f"the database has pageant's tables ({', '.join(ours[:3])}, ...) but "
                "no record of their schema revision (no alembic_version); if they match this "
                "pageant's schema run `pageant db stamp head`, else upgrade into an empty "
                "database and copy the data over"
            )
        return None
    if current not in known_revisions():
        raise newer_schema(current)
    return current
