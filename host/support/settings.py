"""Settings: each setting ``x_y`` is the flag ``--x-y``, the variable ``PAGEANT_X_Y`` and the
TOML key ``x_y`` (file from ``--config`` or ``PAGEANT_CONFIG``), in that precedence."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
)

from pageant.errors import Invalid

ENV_PREFIX = "PAGEANT_"
#: An address as a mail relay takes it: no display name, no spaces, no line breaks.
_ADDRESS = re.compile(r"[^@\s<>,;]+@[^@\s<>,;]+")
_LEVELS = ("debug", "info", "warning", "error")


#: Each database URL scheme pageant accepts, and the driver it runs: the plain spellings
#: (``sqlite://``, ``mysql://``, ``mariadb://``) choose pageant's own.
DATABASE_SCHEMES = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "mysql": "mysql+asyncmy",
    "mariadb": "mysql+asyncmy",
    "mysql+asyncmy": "mysql+asyncmy",
    "mariadb+asyncmy": "mysql+asyncmy",
    "mysql+aiomysql": "mysql+aiomysql",
    "mariadb+aiomysql": "mysql+aiomysql",
}
DATABASE_FORMS = (
    "expected sqlite:///FILE or mysql://USER:PASSWORD@HOST/DATABASE (mariadb:// too; "
    "the drivers sqlite+aiosqlite, mysql+asyncmy and mysql+aiomysql may be named)"
)


def database_url(value: str) -> str:
    """``value`` with the driver pageant runs named (``sqlite:///x.db`` ->
    ``sqlite+aiosqlite:///x.db``, ``mariadb://...`` -> ``mysql+asyncmy://...``); ValueError
    naming the accepted forms otherwise. The message never repeats the URL, which may hold a
    password."""
    scheme, sep, rest = value.strip().partition("://")
    driver = DATABASE_SCHEMES.get(scheme.lower()) if sep else None
    if driver is None:
        shown = f"the scheme {scheme!r}" if sep else "it has no scheme://"
        raise ValueError(f"not a database URL pageant can use ({shown}); {DATABASE_FORMS}")
    url = f"{driver}://{rest}"
    try:
        parsed = urlsplit(url)
        parsed.port  # noqa: B018 - a port that is not a number raises here
    except ValueError as exc:
        raise ValueError(f"not a database URL pageant can read; {DATABASE_FORMS}") from exc
    if driver.startswith("mysql") and not (parsed.hostname and parsed.path.strip("/")):
        raise ValueError(f"a MariaDB URL needs a host and a database; {DATABASE_FORMS}")
    return url


class Settings(BaseModel):
    """Every operator-facing setting with its default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    database_url: str = "sqlite+aiosqlite:///./pageant.db"
    #: The database connections one host keeps open between uses (up to 10 more are opened
    #: under a burst, and closed once used). On MariaDB a host holds at most this + 10 of the
    #: server's ``max_connections``.
    database_pool_size: int = Field(default=20, ge=1, le=500)
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)  # 0: any free port (printed at start)

    # The engine (defaults as in the reference).
    max_attempts: int = Field(default=3, ge=1, le=100)
    retry_seconds: float = Field(default=60, ge=0)
    run_lease_seconds: float = Field(default=900, gt=0)
    step_lease_margin_seconds: float = Field(default=60, ge=0)
    runs_per_tick: int = Field(default=50, ge=1)
    steps_per_run_per_tick: int = Field(default=25, ge=1)
    poll_seconds: float = Field(default=15, gt=0)
    #: How often a serving host looks for run-log lines another process wrote (a `pageant
    #: fire` from a terminal) and wakes its engine; 0 turns the watch off.
    outside_wake_ms: int = Field(default=500, ge=0, le=60_000)
    log_retention_days: int = Field(default=90, ge=1)
    stall_seconds: float = Field(default=3600, gt=0)
    #: The least time between two reads of the same reading with the same params (a
    #: plugin's ``pageant_readings``): every start condition and gate asking within it shares
    #: the one answer, so a game is never polled faster than this per server.
    reading_interval_seconds: float = Field(default=10, ge=1, le=3600)
    horizon_days: int = Field(default=14, ge=1, le=366)
    dispatch_concurrency: int = Field(default=16, ge=1)
    #: The most step answers the engine records in one shared transaction.
    outcome_batch_size: int = Field(default=64, ge=1, le=10_000)
    #: The most HTTP requests (API and console pages) handled at once; the rest wait their
    #: turn in arrival order, so a crowd of readers cannot take every database connection
    #: from the engine. ``/healthz`` and ``/metrics`` never wait.
    http_concurrency: int = Field(default=8, ge=1, le=1000)
    #: The most run consoles (API and web console) read from the database at once; the
    #: rest wait their turn in arrival order, so readers leave the engine its share of the
    #: database pool. A console already kept for its readers is answered without a turn.
    read_concurrency: int = Field(default=2, ge=1, le=1000)
    #: How long a run console, once read, answers every other reader of it (milliseconds;
    #: each console for its own share of it, between a half and the whole): readers within
    #: it share one read, and see the engine's progress up to this late (half as long again
    #: while a paced reader's answer waits for its turn). A write through this host (any
    #: request but GET, HEAD and OPTIONS) is seen at once. A console's reader whose token
    #: was read live within it is not read again (a revoke through another process reaches
    #: console reads this late; every other request at once). 0: every reader reads afresh,
    #: and its token.
    console_max_age_ms: int = Field(default=1000, ge=0, le=60_000)
    #: The most run console requests (API and web console) admitted a second, a quarter
    #: second's worth at once; the rest wait their turn in arrival order. A reader polling
    #: every two seconds asks half a time a second, so this bites only on clients asking
    #: again the moment they are answered. 0: no pace.
    console_reads_per_second: int = Field(default=400, ge=0, le=100_000)
    #: How long a firing's idempotency key is kept: the same key sent again within it
    #: answers the first answer and counts nothing.
    firing_key_hours: float = Field(default=24, gt=0, le=24 * 90)
    #: The oldest a firing's ``at`` (when it happened in the game) may be.
    firing_max_age_seconds: float = Field(default=3600, gt=0, le=7 * 24 * 3600)
    #: The most firings the emit path records in one shared transaction.
    firing_batch_size: int = Field(default=1000, ge=1, le=10_000)
    #: How long a clean stop (SIGTERM, SIGINT) lets steps already in perform finish.
    stop_grace_seconds: float = Field(default=30, ge=0, le=3600)

    # The game link (docs/link.md): the longest a sync is held open waiting for commands,
    # the silence after which a server is down, and the most commands one server may have
    # waiting (past it a call is refused with a sentence, never dropped).
    link_wait_seconds: float = Field(default=20, gt=0, le=300)
    link_offline_seconds: float = Field(default=15, gt=0, le=3600)
    link_queue_max: int = Field(default=1000, ge=1, le=1_000_000)

    #: How ``serve`` writes its log: ``kv`` (key=value) or ``json`` (one object a line).
    log_format: Literal["kv", "json"] = "kv"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    # The ledger: how many times cleanup tries to give one resource back, and the longest
    # a core.lease may borrow a value.
    revert_max_attempts: int = Field(default=3, ge=1, le=100)
    #: The most calls into one plugin at once (performs, reverts, restores): one plugin's
    #: other runs wait their turn when its calls are slow, and no other plugin's do. Below
    #: ``dispatch_concurrency``, a plugin whose performs hang leaves the rest of the
    #: dispatch slots to the others.
    plugin_concurrency: int = Field(default=8, ge=1, le=1000)
    lease_max_minutes: int = Field(default=24 * 60, ge=1)

    webhook_urls: tuple[str, ...] = ()
    webhook_timeout_seconds: float = Field(default=5, gt=0)

    # The announce legs core.email, core.discord and core.slack (docs/announcements.md).
    # The secrets are SecretStr: a listing, a log line or a repr shows asterisks.
    smtp_host: str = ""
    smtp_port: int = Field(default=587, ge=1, le=65535)
    #: ``starttls`` (upgrade a plain connection, port 587), ``tls`` (TLS from the first
    #: byte, port 465) or ``none`` (a relay on a trusted network, port 25).
    smtp_security: Literal["starttls", "tls", "none"] = "starttls"
    #: A PEM file of the certificate authorities to trust for the SMTP server ("" for the
    #: system's), for a relay with a private CA.
    smtp_ca_file: str = ""
    smtp_username: str = ""
    smtp_password: SecretStr = SecretStr("")
    smtp_from: str = ""
    smtp_to: tuple[str, ...] = ()
    #: Each exchange with the relay; keep it well under core.announce's 10-second budget.
    smtp_timeout_seconds: float = Field(default=5, gt=0, le=300)
    discord_webhook_url: SecretStr = SecretStr("")
    slack_webhook_url: SecretStr = SecretStr("")
    #: The longest a chat leg waits, inside one attempt, for a rate limit to pass before it
    #: posts again; a longer ``retry_after`` leaves the step to the engine's retry.
    announce_retry_after_max_seconds: float = Field(default=10, ge=0, le=300)
    #: The event's public page, with ``{slug}`` where its slug goes
    #: (``https://example.org/events/{slug}``): the ``{link}`` of announcement templates.
    public_page_url: str = ""

    # The web console's session cookie is signed with this secret (empty: a random one per
    # process, so sessions end when the host restarts and are not shared between hosts).
    console_secret: str = ""
    console_session_hours: float = Field(default=12, gt=0, le=24 * 30)
    #: pageant is served only through a reverse proxy that sets ``X-Forwarded-Proto`` or
    #: ``Forwarded: proto=`` (replacing any the client sent): the protocol the proxy names
    #: then decides whether the console's cookies are ``Secure``. Off, those headers are
    #: ignored, since any client could send them.
    trusted_proxy: bool = False

    #: The settings file's ``[plugins.<owner>]`` tables: each plugin's own settings.
    _plugin_tables: dict[str, dict[str, Any]] = PrivateAttr(default_factory=dict)

    def plugin_table(self, owner: str) -> dict[str, Any]:
        """The settings file's ``[plugins.<owner>]`` table (empty when there is none)."""
        return dict(self._plugin_tables.get(owner, {}))

    def with_plugin_tables(self, tables: Mapping[str, Any]) -> Settings:
        """These settings, with ``tables`` as the plugins' own (``{owner: {name: value}}``)."""
        copy = self.model_copy()
        copy._plugin_tables = {str(k): dict(v) for k, v in tables.items()}
        return copy

    @field_validator("log_format", "log_level", mode="before")
    @classmethod
    def _case(cls, value: Any) -> Any:
        return (
            value.upper()
            if isinstance(value, str) and value.lower() in _LEVELS
            else (value.lower() if isinstance(value, str) else value)
        )

    @field_validator("database_url")
    @classmethod
    def _driver(cls, value: str) -> str:
        return database_url(value)

    @field_validator("webhook_urls", "smtp_to", mode="before")
    @classmethod
    def _split_urls(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(u.strip() for u in value.split(",") if u.strip())
        return value

    @field_validator("smtp_from", "smtp_to")
    @classmethod
    def _addresses(cls, value: Any) -> Any:
        for address in (value,) if isinstance(value, str) else value:
            if address and (not _ADDRESS.fullmatch(address)):
                raise ValueError(f"{address!r} is not an email address (name@example.org)")
        return value

    @field_validator("discord_webhook_url", "slack_webhook_url")
    @classmethod
    def _secret_url(cls, value: SecretStr) -> SecretStr:
        # The URL is the secret, so the message names its scheme only, never the URL.
        text = value.get_secret_value()
        if text and not text.startswith(("https://", "http://")):
            raise ValueError("expected an https:// URL (the incoming webhook's address)")
        return value

    @field_validator("public_page_url")
    @classmethod
    def _page_url(cls, value: str) -> str:
        if value and (not value.startswith(("https://", "http://")) or "{slug}" not in value):
            raise ValueError(
                "expected an http(s) URL with {slug} where the event's slug goes "
                "(https://example.org/events/{slug})"
            )
        return value


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    out = {}
    for name in Settings.model_fields:
        key = ENV_PREFIX + name.upper()
        if key in environ:
            out[name] = environ[key]
    return out


def _from_file(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError as exc:
        raise Invalid(f"config file {str(path)!r} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise Invalid(f"config file {str(path)!r} is not valid TOML: {exc}") from exc
    data.pop("config", None)
    return data


def _plugin_tables(data: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """Take the ``[plugins.<owner>]`` tables out of a settings file's data."""
    tables = data.pop("plugins", {})
    if not isinstance(tables, dict) or not all(isinstance(v, dict) for v in tables.values()):
        raise Invalid(
            f"config file {str(path)!r}: plugins must be tables, one per owner "
            "([plugins.<owner>] with name = value lines)"
        )
    return tables


def load_settings(
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    config_path: str | Path | None = None,
) -> Settings:
    """Merge flags over the environment over the TOML file over the defaults.

    Raises :class:`~pageant.errors.Invalid` naming every bad setting and where it came from.
    """
    environ = os.environ if environ is None else environ
    config_path = config_path or environ.get(ENV_PREFIX + "CONFIG")
    from_file = _from_file(config_path) if config_path else {}
    tables = _plugin_tables(from_file, config_path) if config_path else {}
    layers = [
        (f"config file {config_path}", from_file),
        ("environment", _from_env(environ)),
        ("flag", {k: v for k, v in (flags or {}).items() if v is not None}),
    ]
    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for where, layer in layers:
        for key, value in layer.items():
            merged[key] = value
            origin[key] = where
    try:
        return Settings.model_validate(merged).with_plugin_tables(tables)
    except ValidationError as exc:
        details = []
        for e in exc.errors():
            key = str(e["loc"][0]) if e["loc"] else "settings"
            source = origin.get(key, "default")
            if source == "environment":
                source = f"environment variable {ENV_PREFIX}{key.upper()}"
            elif source == "flag":
                source = f"flag --{key.replace('_', '-')}"
            # A validator's own sentence, without pydantic's "Value error, " before it.
            message = str(e["ctx"]["error"]) if e["type"] == "value_error" else e["msg"]
            details.append(f"{key} (from {source}): {message}")
        raise Invalid("invalid settings", details=details) from exc
