"""What every command group shares: the settings flags, running a command's coroutine, a
host on the configured database, who a command acts as, and its ``--json`` and table output.

The staff's daily commands (events, runs, steps, fire, actions, token) call the domain
function the admin API calls (nothing in the CLI decides a rule), act as ``cli:<user>`` (the
login of whoever runs it), and print either text or, with ``--json``, what the matching API
route answers.

Every setting ``x_y`` is accepted by every command as ``--x-y`` (over ``PAGEANT_X_Y``, over
the TOML key ``x_y`` in the ``--config`` file, over the default).
"""

from __future__ import annotations

import asyncio
import functools
import getpass
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from pageant.errors import Invalid, PageantError
from pageant.support.settings import ENV_PREFIX, Settings, load_settings
from pageant.support.timefmt import iso

if TYPE_CHECKING:
    from pageant.hosting import Host

T = TypeVar("T")

EXIT_USAGE = 2
#: Where ``pageant --config X`` (given before the command) leaves the file for the command.
CONFIG_KEY = "pageant.config"
#: Where the settings flags given before the command (``pageant --database-url X runs
#: list``) are left for the command.
FLAGS_KEY = "pageant.settings_flags"


def settings_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--config`` and one flag per setting; hand the command a merged ``settings``."""

    @functools.wraps(fn)
    def merged(**kwargs: Any) -> Any:
        before = click.get_current_context().meta.get(FLAGS_KEY) or {}
        # After the command or before it: the command's own wins.
        flags = {
            name: _given(kwargs.pop(name, None), before.get(name)) for name in Settings.model_fields
        }
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


def _given(after: Any, before: Any) -> Any:
    return before if after is None or after == () else after


def group_settings_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """One hidden flag per setting on ``pageant`` itself, so a setting may come before the
    command as ``pageant --help`` says (``pageant --database-url X runs list``); the flags
    given there are left in the context for :func:`settings_options` to merge."""

    @functools.wraps(fn)
    def keep(**kwargs: Any) -> Any:
        given = {name: kwargs.pop(name, None) for name in Settings.model_fields}
        click.get_current_context().meta[FLAGS_KEY] = {
            name: value for name, value in given.items() if value not in (None, ())
        }
        return fn(**kwargs)

    wrapper: Callable[..., Any] = keep
    for name in reversed(list(Settings.model_fields)):
        multiple = name in ("webhook_urls", "smtp_to")
        flag = "--" + name.replace("_", "-")
        wrapper = click.option(flag, name, default=None, multiple=multiple, hidden=True)(wrapper)
    return wrapper


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
    """Run a command's coroutine; a pageant error is its message (and details), exit 1."""
    try:
        return asyncio.run(coro)
    except PageantError as exc:
        click.echo(f"error: {exc.message}", err=True)
        for detail in exc.details:
            click.echo(f"  {detail}", err=True)
        sys.exit(1)


async def require_schema(engine: Any, url: str | None = None) -> None:
    """Refuse a database this pageant cannot work on: unreachable, or its schema behind or
    ahead of this pageant's."""
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


def with_host(
    settings: Settings, work: Callable[[Host], Awaitable[T]], *, start_plugins: bool = False
) -> T:
    """Run ``work`` over a host on the configured database (checked to be at the schema
    head), closing it afterwards; a pageant error is one line and exit 1. ``start_plugins``:
    start the plugins first (a plugin's option sources may need its context)."""
    from pageant.cli.operator import check_sqlite_exists
    from pageant.hosting import Host

    async def _go() -> T:
        check_sqlite_exists(settings.database_url)
        host = Host(settings)
        try:
            await require_schema(host.db, settings.database_url)
            if start_plugins:
                await host.start_plugins()
            return await work(host)
        finally:
            await host.close()

    return run(_go())


async def event_id(host: Host, ref: str) -> int:
    """The id of the event ``ref`` names (an id or a slug)."""
    from pageant.events.definitions import find_event

    async with host.db.connect() as conn:
        return await find_event(conn, ref)


def quiet_plugin_log() -> None:
    """Keep the loader's log lines off standard error: the command says what they would."""
    # The listing prints every refusal with its traceback; the loader's log lines would say
    # it all again on standard error (``serve`` configures logging and keeps them).
    logging.getLogger("pageant.plugins").addHandler(logging.NullHandler())


def actor() -> str:
    """Who the command acts as: ``cli:<login>``."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name at all (a container with no passwd entry)
        user = "unknown"
    return f"cli:{user}"


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")(fn)


def dry_run_params_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--param NAME=VALUE``, repeatable, handed over as ``params``: the run params a
    verification or a rehearsal is made with."""
    return click.option(
        "--param",
        "params",
        multiple=True,
        metavar="NAME=VALUE",
        help="A value for one of the event's declared params, as a run would have (repeatable).",
    )(fn)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def as_json_text(data: Any) -> str:
    """``data`` as the API would send it (instants in ISO 8601 with ``Z``)."""
    return json.dumps(data, default=_default, indent=2, ensure_ascii=False)


def as_json_line(data: Any) -> str:
    """``data`` as :func:`as_json_text` writes it, on one line."""
    return json.dumps(data, default=_default, ensure_ascii=False)


def when(value: Any) -> str:
    """An instant in a table cell: ISO 8601, or ``-``."""
    return "-" if value is None else (iso(value) or "-")


def table(rows: list[list[str]]) -> str:
    """``rows`` (the first one the heading) in columns as wide as their widest cell."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
