"""The ``pageant`` command line.

Every setting ``x_y`` is accepted by every command as ``--x-y`` (over ``PAGEANT_X_Y``, over
the TOML key ``x_y`` in the ``--config`` file, over the default).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pageant.access.roles import ROLES
from pageant.cli import staff
from pageant.errors import Invalid, PageantError
from pageant.settings import ENV_PREFIX, Settings, load_settings

EXIT_USAGE = 2
#: Where ``pageant --config X`` (given before the command) leaves the file for the command.
CONFIG_KEY = "pageant.config"


def settings_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--config`` and one flag per setting; hand the command a merged ``settings``."""

    @functools.wraps(fn)
    def merged(**kwargs: Any) -> Any:
        flags = {name: kwargs.pop(name, None) for name in Settings.model_fields}
        # After the command or before it (``pageant --config X runs list``): the command's
        # own wins.
        config = kwargs.pop("config", None) or click.get_current_context().meta.get(CONFIG_KEY)
        try:
            settings = load_settings(flags, config_path=config)
        except Invalid as exc:
            raise click.UsageError("; ".join(exc.details) or exc.message) from exc
        return fn(settings=settings, **kwargs)

    wrapper: Callable[..., Any] = merged
    for name, field in reversed(list(Settings.model_fields.items())):
        flag = "--" + name.replace("_", "-")
        multiple = name in ("webhook_urls", "smtp_to")
        wrapper = click.option(
            flag,
            name,
            default=None,
            multiple=multiple,
            help=f"(setting {name}; default {field.default!r})",
            show_default=False,
            # Listed once, under `pageant --help`, not repeated on every command.
            hidden=True,
        )(wrapper)
        if multiple:
            wrapper = _none_if_empty(wrapper, name)
    return click.option(
        "--config",
        type=click.Path(dir_okay=False),
        default=None,
        help="A TOML settings file (every setting: see pageant --help).",
    )(wrapper)


def settings_help() -> str:
    """The settings, once, for ``pageant --help``."""
    lines = [
        "Settings: every command accepts each as --flag (over PAGEANT_NAME in the",
        "environment, over the key in the --config TOML file, over the default).",
        "",
        "\b",
    ]
    for name, field in Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        lines.append(f"  {flag:<30} {ENV_PREFIX}{name.upper()} (default {field.default!r})")
    return "\n".join(lines)


def _none_if_empty(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> Any:
        if not kwargs.get(name):
            kwargs[name] = None
        return fn(**kwargs)

    return wrapper


def run(coro: Any) -> Any:
    try:
        return asyncio.run(coro)
    except PageantError as exc:
        click.echo(f"error: {exc.message}", err=True)
        for detail in exc.details:
            click.echo(f"  {detail}", err=True)
        sys.exit(1)


@click.group(epilog=settings_help())
@click.version_option(package_name="pageant")
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    default=None,
    help="A TOML settings file, for any command (also accepted after the command).",
)
@click.pass_context
def main(ctx: click.Context, config: str | None) -> None:
    """pageant: scheduled, multi-phase world events for game servers."""
    ctx.meta[CONFIG_KEY] = config


# ── db ────────────────────────────────────────────────────────────────────────


@main.group()
def db() -> None:
    """The database schema."""


@db.command("upgrade")
@settings_options
def db_upgrade(settings: Settings) -> None:
    """Create or migrate the database schema to the newest revision."""
    from pageant.db.migrate import upgrade

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

    run(_go())


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


# ── plugins ───────────────────────────────────────────────────────────────────


@main.command()
@click.option("--all", "show_all", is_flag=True, help="Also list what each loaded plugin declared.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option(
    "--allow-refused",
    is_flag=True,
    help="Exit 0 even when a plugin is refused (by default a refusal exits 1).",
)
@settings_options
def plugins(settings: Settings, show_all: bool, as_json: bool, allow_refused: bool) -> None:
    """List the plugins: loaded ones, and refused ones with their reason.

    The plugins are started as the host starts them, so a lease target its self-check drops
    is shown dropped, with the reason. Exit 1 when any plugin is refused, unless
    --allow-refused.
    """
    from pageant.hosting import Host
    from pageant.plugins.loader import plugin_listing

    _quiet_plugin_log()
    host = Host(settings)

    async def _start() -> None:
        try:
            await host.start_plugins()
        finally:
            await host.close()

    run(_start())
    manager = host.plugins
    items = plugin_listing(manager)
    if show_all:
        declared = _declared_by(manager)
        for item in items:
            item["declares"] = declared.get(f"{item['distribution']}[{item['name']}]", {})
    if as_json:
        click.echo(json.dumps({"items": items}, indent=2))
    else:
        for line in plugin_lines(items):
            click.echo(line)
    if any(item["status"] == "refused" for item in items) and not allow_refused:
        sys.exit(1)


def _quiet_plugin_log() -> None:
    # The listing prints every refusal with its traceback; the loader's log lines would say
    # it all again on standard error (``serve`` configures logging and keeps them).
    logging.getLogger("pageant.plugins").addHandler(logging.NullHandler())


def plugin_lines(items: list[dict[str, Any]]) -> list[str]:
    """The human rendering of the plugin list (``pageant plugins`` and ``serve``'s start)."""
    lines = []
    for item in items:
        head = f"{item['distribution']}[{item['name']}] {item['version']}"
        if item["status"] == "loaded":
            lines.append(f"loaded   {head}  owner={item['owner']} contract={item['contract']}")
            for kind, ids in item.get("declares", {}).items():
                lines.append(f"           {kind}: {', '.join(ids)}")
            for dropped in item.get("dropped") or []:
                lines.append(
                    f"           dropped  {dropped['lease']} target {dropped['target']!r}: "
                    f"{dropped['reason']}"
                )
            if "declares" in item and item.get("settings") is not None:
                shown = ", ".join(f"{k}={v}" for k, v in item["settings"].items())
                lines.append(f"           settings: {shown or 'none'}")
        else:
            lines.append(f"refused  {head}")
            lines.append(f"           {item['reason']}")
            for frame in (item.get("traceback") or "").splitlines():
                lines.append(f"           | {frame}")
    return lines


def _declared_by(manager: Any) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for (kind, ident), owner in sorted(manager.registry.owners.items()):
        out.setdefault(owner, {}).setdefault(kind, []).append(ident)
    return out


@main.command("contract-check")
@click.option(
    "--plugin",
    "names",
    multiple=True,
    metavar="NAME",
    help="A plugin to check, by entry-point or distribution name (repeatable); "
    "default: every installed plugin but the host's own.",
)
@click.option(
    "--manifest",
    type=click.Path(dir_okay=False, path_type=Path),
    default="contract-manifest.json",
    show_default=True,
    help="The committed contract manifest to compare with.",
)
@click.option("--write", is_flag=True, help="Regenerate the manifest instead of comparing.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@settings_options
def contract_check(
    settings: Settings, names: tuple[str, ...], manifest: Path, write: bool, as_json: bool
) -> None:
    """Check plugins against the contract: what a plugin's CI runs.

    Loads them as serve does, dry-runs what they declare, and compares their catalog with
    the committed manifest. Exit 0 pass, 1 violations, 2 usage.
    """
    from pageant.kit import check as kit

    try:
        report = asyncio.run(
            kit.contract_check(names, manifest=manifest, write=write, settings=settings)
        )
    except kit.UnknownPlugin as exc:
        raise click.UsageError(str(exc)) from exc
    click.echo(json.dumps(report.as_dict(), indent=2) if as_json else kit.render(report))
    sys.exit(0 if report.ok else 1)


@main.command("new-plugin")
@click.argument("name")
@click.option(
    "--directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="Where the new folder NAME is made.",
)
def new_plugin(name: str, directory: Path) -> None:
    """Scaffold a working plugin distribution in the new folder NAME.

    NAME becomes the plugin's owner (the prefix of every id it declares). The folder holds
    pyproject.toml with the entry point, a module with one action, one trigger and one
    option source, tests written with pageant.testing, the committed contract manifest, a
    README and a CI workflow running `pageant contract-check --plugin NAME`.
    """
    from pageant.cli.scaffold import ScaffoldError, scaffold

    try:
        folder = scaffold(name, directory)
    except ScaffoldError as exc:
        raise click.UsageError(str(exc)) from exc
    click.echo(f"created {folder}")
    click.echo(f"next: cd {folder} && pip install -e '.[test]' && pytest")
    click.echo(f"      pageant contract-check --plugin {name}")
    click.echo("      a running `pageant serve` loads it once restarted")


# ── tokens ────────────────────────────────────────────────────────────────────


@main.group()
def token() -> None:
    """API tokens."""


def _expiry(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    from pageant.access.tokens import MAX_EXPIRY, parse_duration

    if value is None:
        return None
    try:
        found = parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if found > MAX_EXPIRY:
        raise click.BadParameter(f"at most {MAX_EXPIRY.days} days")
    return found


@token.command("create")
@click.option("--role", required=True, type=click.Choice(ROLES))
@click.option("--name", required=True, help="Who or what the token is for.")
@click.option(
    "--expires",
    default=None,
    callback=_expiry,
    metavar="DURATION",
    help="Refuse the token after this long: 90m, 12h, 30d, 2w (default: never).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the token's listing shape and the token as JSON (the token shown this once).",
)
@settings_options
def token_create(settings: Settings, role: str, name: str, expires: Any, as_json: bool) -> None:
    """Create a token and print it (only the token; it is shown once and stored hashed)."""
    from pageant.access.tokens import issue_token
    from pageant.cli.staff import actor, as_json_text, with_host

    async def _go(host: Any) -> dict[str, Any]:
        return await issue_token(
            host.db,
            role=role,
            name=name,
            now=host.clock.now(),
            actor=actor(),
            expires_in=expires,
        )

    issued = with_host(settings, _go)
    click.echo(as_json_text(issued) if as_json else issued["token"])


@token.command("list")
@click.option("--revoked", "include_revoked", is_flag=True, help="Include revoked tokens.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@settings_options
def token_list(settings: Settings, include_revoked: bool, as_json: bool) -> None:
    """List the tokens (never a token or its hash)."""
    from pageant.access.tokens import list_tokens
    from pageant.cli.staff import as_json_text, render_tokens, with_host

    async def _go(host: Any) -> list[dict[str, Any]]:
        return await list_tokens(host.db, now=host.clock.now(), include_revoked=include_revoked)

    items = with_host(settings, _go)
    click.echo(as_json_text({"items": items}) if as_json else render_tokens(items))


@token.command("revoke")
@click.argument("ref", metavar="NAME|ID")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@settings_options
def token_revoke(settings: Settings, ref: str, as_json: bool) -> None:
    """Revoke a token, by id or by name: its next request is refused."""
    from pageant.access.tokens import find_token, revoke_token
    from pageant.cli.staff import actor, as_json_text, with_host

    async def _go(host: Any) -> dict[str, Any]:
        token_id = await find_token(host.db, ref)
        return await revoke_token(host.db, token_id, actor=actor(), now=host.clock.now())

    revoked = with_host(settings, _go)
    if as_json:
        click.echo(as_json_text(revoked))
    else:
        click.echo(f"token {revoked['id']} ({revoked['name']}, {revoked['role']}) revoked")


async def _require_schema(engine: Any, url: str | None = None) -> None:
    from pageant.cli.operator import newer_schema, unreachable
    from pageant.db.migrate import known_revisions, schema_state
    from pageant.errors import SchemaOutOfDate

    try:
        state = await schema_state(engine)
    except Exception as exc:
        raise unreachable(url or str(engine.url), exc) from exc
    if state.current is not None and state.current not in known_revisions():
        raise newer_schema(state.current)
    if not state.up_to_date:
        raise SchemaOutOfDate(
            f"the database schema is at {state.current or 'nothing (empty database)'}, "
            f"this pageant needs {state.head}; run `pageant db upgrade` first"
        )


# ── demo ──────────────────────────────────────────────────────────────────────


@main.command()
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the run console as JSON (as GET /api/v1/admin/runs/{run_id} answers it); "
    "the progress lines go to standard error.",
)
@click.option(
    "--faults",
    is_flag=True,
    help="Run the same event with the shard going down mid-phase and its first two "
    "despawns failing: the run degrades, waits and recovers.",
)
@click.option(
    "--serve",
    "and_serve",
    is_flag=True,
    help="Afterwards, serve the API and the web console over the demo's database (with a "
    "printed admin token) until SIGTERM or SIGINT.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=None,
    help="Seconds to wait for the run to complete and give everything back before giving "
    "up (exit 1); default 60, 300 with --game openarena.",
)
@click.option(
    "--game",
    type=click.Choice(["shard", "openarena"]),
    default="shard",
    show_default=True,
    help="shard: the Champion Muster on the simulated shard. openarena: the Low-Gravity "
    "Frenzy on a private OpenArena server, in real time (needs pageant-openarena and "
    "Debian's openarena-server).",
)
@settings_options
def demo(
    settings: Settings,
    as_json: bool,
    faults: bool,
    and_serve: bool,
    timeout: float | None,
    game: str,
) -> None:
    """Run the Champion Muster on the simulated shard and print its run console.

    Needs the pageant-shard example plugin (pip install -e ./example_plugins/shard). Uses
    a SQLite database in a temporary folder unless --database-url names an empty one; the
    host's clock runs 60 times fast. Exit 0 when the run completed and gave back everything
    it held, 1 otherwise. --game openarena runs the Low-Gravity Frenzy on a real OpenArena
    server instead.
    """
    from pageant.cli import showcase

    if game == "openarena" and and_serve:
        raise click.UsageError("--serve runs with --game shard only")
    _quiet_plugin_log()  # the demo says what the loader would log (a dropped lease target)
    live = None if as_json or not sys.stdout.isatty() else showcase.DemoLive()
    say: Callable[[str], None] = (
        functools.partial(click.echo, err=as_json) if live is None else live.say
    )
    show = (lambda view: None) if live is None else live.show

    async def serve_after(host: Any, result: Any) -> None:
        if live is not None:
            live.stop()
        _print_demo_end(result, as_json)
        await _serve_demo(host, settings)

    async def go() -> Any:
        try:
            if game == "openarena":
                from pageant.cli import arena

                return await arena.run_openarena_demo(
                    settings, say=say, show=show, timeout=timeout or 300, faults=faults
                )
            return await showcase.run_demo(
                settings,
                say=say,
                show=show,
                timeout=timeout or showcase.TIMEOUT_SECONDS,
                faults=faults,
                serve=serve_after if and_serve else None,
            )
        finally:
            if live is not None:
                live.stop()

    result = run(go())
    if not and_serve:
        _print_demo_end(result, as_json)
    if result.problem is not None:
        click.echo(f"error: {result.problem}", err=True)
        sys.exit(1)


def _print_demo_end(result: Any, as_json: bool) -> None:
    from pageant.cli import showcase
    from pageant.cli.demo_text import summary

    if as_json:
        click.echo(showcase.console_json(result.console))
        return
    for line in summary(result.console, result.wall_seconds):
        click.echo(line)
    click.echo("The whole run console, log included: pageant demo --json")


async def _serve_demo(host: Any, settings: Settings) -> None:
    """Serve the demo's host: the API and the console, an admin token printed first."""
    from pageant.access.tokens import create_token
    from pageant.cli.serving import serve_host

    set_factor = getattr(host.clock, "set_factor", None)
    if set_factor is not None:
        set_factor(1.0)  # from here on the clock keeps the wall clock's pace
    token = await create_token(host.db, role="admin", name="demo", now=host.clock.now())
    click.echo()
    click.echo(f"admin token: {token}")
    click.echo("  e.g. curl -H 'Authorization: Bearer <token>' .../api/v1/admin/runs/1")
    await serve_host(host, settings, say=click.echo)


staff.register(main, settings_options)


# ── serve ─────────────────────────────────────────────────────────────────────


@main.command()
@settings_options
def serve(settings: Settings) -> None:
    """Run the host: the engine and the HTTP API.

    The address is bound before the engine starts. SIGTERM or SIGINT stops cleanly: nothing
    new is claimed, steps in perform get ``stop_grace_seconds`` to finish, every claim is
    handed back, and the exit status is 0. Exit 1: an error named on one line.
    """
    from pageant.cli.serving import configure_logging, serve_host
    from pageant.hosting import Host

    configure_logging(settings)
    host = Host(settings)

    async def _check() -> None:
        try:
            from pageant.cli.operator import check_sqlite_exists

            check_sqlite_exists(settings.database_url)
            await _require_schema(host.db, settings.database_url)
        finally:
            await host.close()  # this loop ends here; the app opens its own pool

    run(_check())
    from pageant.plugins.loader import plugin_listing

    for line in plugin_lines(plugin_listing(host.plugins)):
        click.echo(line, err=True)
    run(serve_host(host, settings, say=click.echo))


# ── the switchboard and the dry runs ────────────────────────────────────────────

from pageant.cli.switchboard import (  # noqa: E402 - needs main's helpers, defined above
    actions,
    rehearse,
    verify,
)

main.add_command(actions)
main.add_command(verify)
main.add_command(rehearse)


if __name__ == "__main__":  # pragma: no cover
    main()
