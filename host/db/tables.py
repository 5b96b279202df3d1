"""The tables. Created and changed only by the Alembic migrations in ``migrations/``; a test
compares a migrated database with this metadata so the two never drift apart."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Computed,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    Update,
    text,
)
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import Executable
from sqlalchemy.sql.elements import ColumnElement

from pageant.db.types import BigId, UTCDateTime
from pageant.states import RUN_ENDED, RUN_LIVE, ResourceStatus, RunStatus, StepStatus

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

#: The run statuses that hold a concurrency key (a run that is live in the world).
LIVE_RUN_STATUSES = RUN_LIVE
RUN_STATUSES = tuple(RunStatus)
TERMINAL_RUN_STATUSES = RUN_ENDED
STEP_STATUSES = tuple(StepStatus)
TERMINAL_STEP_STATUSES = tuple(s for s in StepStatus if s.ended)
#: A ledger row holds its target while it is ours to give back (``pending`` is the
#: placeholder written before a dispatch, ``revert_failed`` is out there with nothing left
#: to try) and releases it once it is not (``reverted``, ``drifted``: someone else changed
#: it, ``orphaned``: the plugin no longer reports it).
HOLDING_RESOURCE_STATUSES = tuple(s for s in ResourceStatus if s.holding)
RELEASED_RESOURCE_STATUSES = tuple(s for s in ResourceStatus if not s.holding)
RESOURCE_STATUSES = HOLDING_RESOURCE_STATUSES + RELEASED_RESOURCE_STATUSES


def _sql_words(words: tuple[str, ...]) -> str:
    """``'a', 'b'``: status words as the SQL of a generated column or a partial index."""
    return ", ".join(f"'{w}'" for w in words)


HOLDING_SQL = f"status IN ({_sql_words(HOLDING_RESOURCE_STATUSES)})"

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(100), nullable=False),
    Column("role", String(20), nullable=False),
    # sha256 of the token; the token itself is shown once and never stored.
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime, nullable=True),
    # The audit: who made the token and who revoked it (an actor, as the run log names one).
    Column("created_by", String(100), nullable=True),
    Column("revoked_by", String(100), nullable=True),
    Column("expires_at", UTCDateTime, nullable=True),
    # Written at most once a minute per token, never once per request.
    Column("last_used_at", UTCDateTime, nullable=True),
    # A game token's bindings: the server ids it speaks for on the game link and the owners
    # whose triggers it may fire, each a list of names. NULL: made before bindings existed,
    # so it fires every owner's triggers (and speaks for no server on the link).
    Column("servers", JSON, nullable=True),
    Column("owners", JSON, nullable=True),
    # The zone its holder chose to read the console in (an IANA name); NULL: each page's own.
    # Kept with the token, not in a browser, so it follows the person to every browser.
    Column("zone", String(64), nullable=True),
)

event_series = Table(
    "event_series",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("title", String(200), nullable=False),
    Column("slug", String(100), nullable=False, unique=True),
    Column("description", Text, nullable=False, server_default=""),
    Column("visibility", String(10), nullable=False, server_default="staff"),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

#: A blackout: a named, shared calendar of periods that the events subscribing to it do not
#: run in (``pageant.schedules.blackouts``). ``periods`` is its checked list, read in its
#: own ``timezone``; an archived one applies to nothing.
event_blackouts = Table(
    "event_blackouts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("slug", String(100), nullable=False, unique=True),
    Column("name", String(200), nullable=False),
    Column("timezone", String(64), nullable=False),
    Column("periods", JSON, nullable=False),
    Column("state", String(10), nullable=False, server_default="active"),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

event_definitions = Table(
    "event_definitions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("title", String(200), nullable=False),
    Column("slug", String(100), nullable=False, unique=True),
    Column("description", Text, nullable=False, server_default=""),
    Column("timezone", String(64), nullable=False, server_default="UTC"),
    Column("grace_seconds", Integer, nullable=False, server_default="300"),
    Column("concurrency_key", String(100), nullable=True),
    # What a run does when it becomes due while another run holds its key (states.Overlap).
    Column("overlap", String(10), nullable=False, server_default="hold"),
    Column("series_id", Integer, ForeignKey("event_series.id"), nullable=True, index=True),
    Column("visibility", String(10), nullable=False, server_default="staff"),
    Column("state", String(10), nullable=False, server_default="draft"),
    Column("spec", JSON, nullable=False),
    # No foreign key: versions reference definitions, and a cycle of constraints buys nothing.
    Column("current_version_id", Integer, nullable=True),
    # How far the published schedule has been expanded into runs; the expansion stage reads
    # only definitions whose horizon has moved past this, so an idle tick stays cheap.
    Column("expanded_until", UTCDateTime, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("created_by", String(100), nullable=True),
    Index(None, "state", "expanded_until"),
)

event_versions = Table(
    "event_versions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("definition_id", Integer, ForeignKey("event_definitions.id"), nullable=False),
    Column("number", Integer, nullable=False),
    Column("spec", JSON, nullable=False),
    Column("timezone", String(64), nullable=False),
    Column("published_at", UTCDateTime, nullable=False),
    Column("published_by", String(100), nullable=True),
    Column("verified_at", UTCDateTime, nullable=True),
    Column("verified_by", String(100), nullable=True),
    UniqueConstraint("definition_id", "number"),
)

event_runs = Table(
    "event_runs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("definition_id", Integer, ForeignKey("event_definitions.id"), nullable=False),
    Column("version_id", Integer, ForeignKey("event_versions.id"), nullable=False),
    # NOT NULL DEFAULT '': NULLs never collide in a unique index, so a NULL scope would let
    # the same occurrence be inserted twice.
    Column("scope", String(100), nullable=False, server_default=""),
    Column("scheduled_for", UTCDateTime, nullable=False),
    # The occurrence's wall-clock slot in the definition's zone ("2027-03-26T20:00"), so a
    # re-expansion after a zone, tzdata or schedule change moves a row instead of adding one.
    Column("occurrence_local", String(16), nullable=True),
    Column("source", String(10), nullable=False),  # manual | schedule
    Column("hold_until", UTCDateTime, nullable=True),
    Column("status", String(12), nullable=False),
    Column("health", String(10), nullable=False, server_default="ok"),
    Column("cleanup_status", String(14), nullable=False, server_default="not_required"),
    Column("current_phase", String(64), nullable=True),
    Column("claimed_by", String(100), nullable=True),
    Column("lease_until", UTCDateTime, nullable=True),
    Column("last_error", Text, nullable=True),
    Column("cancel_reason", String(200), nullable=True),
    Column("concurrency_key", String(100), nullable=True),
    # MariaDB has no partial index: the key is held only while the run is live, so the
    # uniqueness lives on a generated column that is NULL once the run lets go.
    Column(
        "concurrency_lock",
        String(100),
        Computed(
            f"CASE WHEN status IN ({_sql_words(RUN_LIVE)}) THEN concurrency_key END",
            persisted=True,
        ),
        nullable=True,
        unique=True,
    ),
    Column("dst_adjusted", JSON, nullable=True),
    # The values the run was started with, one per param its spec declares (defaults filled).
    Column("params", JSON, nullable=True),
    # Where a person moved this occurrence from: set, the row keeps its occurrence slot and
    # the schedule never moves it back.
    Column("moved_from", UTCDateTime, nullable=True),
    # The current answer to "why is this run not advancing", logged once per change.
    Column("waiting_reason", String(20), nullable=True),
    Column("waiting_since", UTCDateTime, nullable=True),
    # Set when the event's catch-up policy let this run start after its grace passed while
    # no host ran: why it may still start (its words, for the start's line and the calendar).
    Column("catch_up", String(200), nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("started_at", UTCDateTime, nullable=True),
    Column("ended_at", UTCDateTime, nullable=True),
    UniqueConstraint("definition_id", "scope", "scheduled_for"),
    Index(None, "status", "scheduled_for"),
    Index(None, "status", "lease_until"),
    Index(None, "definition_id", "status"),
)

event_run_steps = Table(
    "event_run_steps",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("event_runs.id"), nullable=False),
    Column("phase", String(64), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("label", String(200), nullable=False),
    Column("action", String(200), nullable=False),
    Column("action_version", Integer, nullable=False),
    Column("params", JSON, nullable=False),
    Column("on_failure", String(10), nullable=False),
    Column("status", String(10), nullable=False, server_default="pending"),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("due_at", UTCDateTime, nullable=True),
    Column("claimed_by", String(100), nullable=True),
    # running with a NULL claim lease = parked, waiting for a person.
    Column("lease_until", UTCDateTime, nullable=True),
    Column("idempotency_key", String(64), nullable=False, unique=True),
    Column("last_error", Text, nullable=True),
    Column("note", Text, nullable=True),
    Column("started_at", UTCDateTime, nullable=True),
    Column("finished_at", UTCDateTime, nullable=True),
    # What the step paid against its run's budget ({dimension: amount}), written in the
    # transaction that paid it: a step that has paid never pays again, whatever retries it.
    Column("spent", JSON, nullable=True),
    UniqueConstraint("run_id", "phase", "seq"),
    Index(None, "status", "lease_until"),
    Index(None, "status", "due_at"),
    # A phase's first step of one status, in seq order: the cursor's read (pageant.db.runs).
    Index(None, "run_id", "phase", "status", "seq"),
)

#: The (run_id, phase, seq) index by name, for the MariaDB hint on the reads that look for a
#: run's first open step (:data:`RUN_PHASE_ORDER`).
RUN_PHASE_SEQ_INDEX = "uq_event_run_steps_run_id_phase_seq"
#: MariaDB's index hint for a correlated read of one run's phase in seq order. Its optimizer
#: otherwise walks the whole index, or filters through the status index, while statistics are
#: young (a new database: the table looks a row long) or pending steps are many; either way
#: a read that should touch one phase's steps touches every run's.
RUN_PHASE_ORDER = f"FORCE INDEX ({RUN_PHASE_SEQ_INDEX})"
#: The (run_id, phase, status, seq) index by name: a phase's first pending (or running) step
#: is its first entry for that status, found without reading the phase's finished steps.
RUN_PHASE_STATUS_INDEX = "ix_event_run_steps_run_id_phase_status_seq"
#: MariaDB's index hint for the correlated read of a phase's first step of one status.
RUN_PHASE_STATUS_ORDER = f"FORCE INDEX ({RUN_PHASE_STATUS_INDEX})"

#: MariaDB's index hint for a statement that names its rows by id (:func:`by_primary_key`).
PRIMARY_KEY_HINT = "FORCE INDEX (PRIMARY)"

_Keyed = TypeVar("_Keyed", bound=Update)


def by_primary_key(statement: _Keyed) -> _Keyed:
    """``statement``, an UPDATE that names its row by id, told on MariaDB to find that row
    through the primary key (``FORCE INDEX (PRIMARY)``; SQLite's statement is unchanged).

    Its other conditions (a status, a lease, an attempt: the compare-and-set) are on columns
    the status indexes lead with. While statistics are young, MariaDB planned a step's claim
    as a range over ``(status, due_at)``: it read, and locked, every pending step's index
    entry to change one row, and two hosts' claims deadlocked on entries neither changed.
    """
    return statement.with_hint(PRIMARY_KEY_HINT, dialect_name="mysql")


async def changed_one(
    conn: AsyncConnection, statement: Executable, params: Mapping[str, Any] | None = None
) -> bool:
    """Run a compare-and-set on one row; True when it changed that row. (SQLAlchemy's MySQL
    dialects report *matched* rows, so the statement's WHERE carries the state it expects:
    a row that matched is a row that changed.)"""
    return (await conn.execute(statement, params)).rowcount == 1


def status_in(column: ColumnElement[str], statuses: Sequence[str]) -> ColumnElement[bool]:
    """The WHERE of a compare-and-set that acts from ``statuses`` (a move's ``froms``):
    ``column = 'a'`` for one, ``column IN ('a', 'b')`` for several."""
    if len(statuses) == 1:
        return column == statuses[0]
    return column.in_(list(statuses))


event_run_log = Table(
    "event_run_log",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("event_runs.id"), nullable=False),
    Column("step_id", Integer, nullable=True),
    Column("kind", String(40), nullable=False),
    Column("phase", String(64), nullable=True),
    Column("detail", JSON, nullable=True),
    Column("actor", String(100), nullable=True),
    Column("at", UTCDateTime, nullable=False),
    Index(None, "run_id", "id"),
    # The prune reads only lines older than the retention: its cost follows what it deletes,
    # never the size of the history.
    Index(None, "at"),
)

event_run_phase_gates = Table(
    "event_run_phase_gates",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("event_runs.id"), nullable=False),
    Column("phase", String(64), nullable=False),
    Column("kind", String(10), nullable=False),  # after | on
    Column("trigger_id", String(200), nullable=True),
    Column("condition", JSON, nullable=True),
    Column("needed", Integer, nullable=False, server_default="1"),
    Column("tally", Integer, nullable=False, server_default="0"),
    Column("entered_at", UTCDateTime, nullable=False),
    Column("deadline", UTCDateTime, nullable=True),
    Column("last_event_at", UTCDateTime, nullable=True),
    Column("last_event_counted", Boolean, nullable=True),
    Column("satisfied_at", UTCDateTime, nullable=True),
    Column("satisfied_by", String(10), nullable=True),  # deadline | tally | forced
    # One equality the condition requires, as pageant.gates.matching writes it
    # ("server=\"eu-2\""), or '' when none narrows it: a firing reads only the gates whose
    # key it carries, and the '' ones.
    Column("match_key", String(255), nullable=False, server_default=""),
    UniqueConstraint("run_id", "phase"),
    Index(None, "trigger_id", "satisfied_at"),
    Index(None, "satisfied_at", "deadline"),
    Index(None, "trigger_id", "match_key", "satisfied_at"),
)

#: A firing's idempotency key, kept per issuer (a game token, ``token:7``, or a plugin,
#: ``plugin:wisps``) for ``firing_key_hours``: a firing sent again under its key answers
#: ``answer`` and counts nothing.
trigger_firing_keys = Table(
    "trigger_firing_keys",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("issuer", String(100), nullable=False),
    Column("key", String(200), nullable=False),
    Column("trigger_id", String(200), nullable=False),
    Column("answer", JSON, nullable=True),
    Column("fired_at", UTCDateTime, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    UniqueConstraint("issuer", "key"),
    Index(None, "created_at"),
)

#: When each trigger last fired, and with what: with a gate's own last counted firing, all
#: a held gate's "the last firing did not match" needs, without a write to every gate a
#: firing misses.
trigger_last_firings = Table(
    "trigger_last_firings",
    metadata,
    Column("trigger_id", String(200), primary_key=True),
    Column("last_at", UTCDateTime, nullable=False),
    Column("payload", JSON, nullable=True),
)

event_run_participants = Table(
    "event_run_participants",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("event_runs.id"), nullable=False),
    Column("step_id", Integer, nullable=True),
    Column("name", String(100), nullable=False),
    Column("role", String(50), nullable=True),
    Column("at", UTCDateTime, nullable=False),
    # A name counts once per run however many steps (or retries) report it.
    UniqueConstraint("run_id", "name"),
)

event_run_results = Table(
    "event_run_results",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("event_runs.id"), nullable=False),
    Column("step_id", Integer, nullable=False),
    Column("phase", String(64), nullable=False),
    Column("title", String(200), nullable=False),
    Column("entries", JSON, nullable=False),
    Column("at", UTCDateTime, nullable=False),
    # One table of results per step: a retried step records it once.
    UniqueConstraint("step_id"),
    Index(None, "run_id"),
)

event_action_settings = Table(
    "event_action_settings",
    metadata,
    # One row per action an admin has an opinion about; no row means the default by risk.
    Column("action_id", String(200), primary_key=True),
    Column("enabled", Boolean, nullable=False),
    # {dimension: integer >= 0 | null}; null is "metered, not bounded".
    Column("caps", JSON, nullable=False),
    Column("updated_by", String(100), nullable=True),
    Column("updated_at", UTCDateTime, nullable=False),
)

event_action_settings_history = Table(
    "event_action_settings_history",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("action_id", String(200), nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("caps", JSON, nullable=False),
    # What the row said before (null: there was no row, the default applied).
    Column("before", JSON, nullable=True),
    Column("actor", String(100), nullable=True),
    Column("at", UTCDateTime, nullable=False),
    Index(None, "action_id", "id"),
)

event_run_budget = Table(
    "event_run_budget",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("event_runs.id"), nullable=False),
    Column("dimension", String(200), nullable=False),
    # NULL: uncapped, still metered. A dimension with no row at all is refused.
    Column("cap", Integer, nullable=True),
    Column("consumed", Integer, nullable=False, server_default="0"),
    # The action whose switchboard cap is the tightest (the one this cap came from).
    Column("cap_source_action", String(200), nullable=True),
    # Every action of the run's version that spends this dimension, so a changed switchboard
    # can re-derive the tightest cap of a run that has not ended.
    Column("actions", JSON, nullable=False),
    UniqueConstraint("run_id", "dimension"),
)

event_run_resources = Table(
    "event_run_resources",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("event_runs.id"), nullable=False),
    # The record of what was changed in the world outlives the row that scheduled it.
    Column(
        "step_id", Integer, ForeignKey("event_run_steps.id", ondelete="SET NULL"), nullable=True
    ),
    Column("owner", String(64), nullable=False),
    # "@step" for the placeholder written before a dispatch (ref: the idempotency key),
    # "@lease:<lease id>" for a lease (ref: its target), otherwise what the plugin reported.
    Column("kind", String(120), nullable=False),
    Column("ref", String(200), nullable=False),
    Column("status", String(14), nullable=False),
    # MariaDB has no partial index: 1 while the row holds its target, NULL once released, so
    # the unique index below collides only among holding rows. It reads status alone: a
    # stored column built on step_id would make MariaDB refuse its SET NULL (error 1901).
    Column(
        "holding",
        Integer,
        Computed(f"CASE WHEN {HOLDING_SQL} THEN 1 END", persisted=True),
        nullable=True,
    ),
    # {action, detail} for a reported resource; {lease, target, baseline, applied} for a lease.
    Column("payload", JSON, nullable=True),
    Column("lease_until", UTCDateTime, nullable=True),
    Column("revert_attempts", Integer, nullable=False, server_default="0"),
    Column("last_error", Text, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    # On SQLite the same key is also a partial index, so it reads status there as well.
    Index(
        "uq_event_run_resources_holding_key",
        "owner",
        "kind",
        "ref",
        "holding",
        unique=True,
        sqlite_where=text(HOLDING_SQL),
    ),
    # The cleanup stage starts from the rows that hold: its idle cost follows them, never
    # the number of runs.
    Index(None, "holding", "run_id"),
    Index(None, "run_id", "id"),
)

#: The game link's commands (docs/link.md): a plugin's call to a game that can only call
#: out, kept as a row so any host's agent sync can deliver it and a restart loses nothing.
#: One row per (server, command, key): a retry of the step finds its command again.
link_commands = Table(
    "link_commands",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("server", String(100), nullable=False),
    Column("owner", String(100), nullable=False),
    Column("command", String(100), nullable=False),
    Column("key", String(200), nullable=False),
    Column("payload", JSON, nullable=True),
    # queued -> delivered -> answered; queued|delivered -> withdrawn (its budget ran out).
    Column("status", String(12), nullable=False),
    # A withdrawn command: 'never_delivered' (nothing happened) or 'unanswered'.
    Column("withdrawn_as", String(20), nullable=True),
    Column("deadline", UTCDateTime, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("delivered_at", UTCDateTime, nullable=True),
    Column("deliveries", Integer, nullable=False, server_default="0"),
    Column("answered_at", UTCDateTime, nullable=True),
    # {"answer": ...} or {"error": "..."}: what the agent said, once.
    Column("answer", JSON, nullable=True),
    # An answer that came after the command was withdrawn: recorded, never acted on.
    Column("late", Boolean, nullable=False, server_default=text("0")),
    UniqueConstraint("server", "command", "key"),
    Index(None, "server", "status"),
    Index(None, "status", "deadline"),
)

#: When each game-link server last synced (any host's sync): its availability.
link_servers = Table(
    "link_servers",
    metadata,
    Column("server", String(100), primary_key=True),
    Column("last_sync_at", UTCDateTime, nullable=False),
)

#: Every table, in an order that respects foreign keys (for emptying between tests).
ALL_TABLES = (
    link_commands,
    link_servers,
    trigger_firing_keys,
    trigger_last_firings,
    event_run_resources,
    event_run_budget,
    event_action_settings_history,
    event_action_settings,
    event_run_results,
    event_run_participants,
    event_run_phase_gates,
    event_run_log,
    event_run_steps,
    event_runs,
    event_versions,
    event_definitions,
    event_series,
    event_blackouts,
    api_tokens,
)
