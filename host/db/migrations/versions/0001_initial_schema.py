"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30 08:41:45.024563
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pageant.db.types import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("revoked_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    op.create_table(
        "event_series",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("slug", sa.String(length=100), nullable=False),
        sa.Column("description", sa.Text(), server_default="", nullable=False),
        sa.Column("visibility", sa.String(length=10), server_default="staff", nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_series")),
        sa.UniqueConstraint("slug", name=op.f("uq_event_series_slug")),
    )
    op.create_table(
        "event_definitions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("slug", sa.String(length=100), nullable=False),
        sa.Column("description", sa.Text(), server_default="", nullable=False),
        sa.Column("timezone", sa.String(length=64), server_default="UTC", nullable=False),
        sa.Column("grace_seconds", sa.Integer(), server_default="300", nullable=False),
        sa.Column("concurrency_key", sa.String(length=100), nullable=True),
        sa.Column("series_id", sa.Integer(), nullable=True),
        sa.Column("visibility", sa.String(length=10), server_default="staff", nullable=False),
        sa.Column("state", sa.String(length=10), server_default="draft", nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("current_version_id", sa.Integer(), nullable=True),
        sa.Column("expanded_until", UTCDateTime(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("created_by", sa.String(length=100), nullable=True),
        sa.ForeignKeyConstraint(
            ["series_id"],
            ["event_series.id"],
            name=op.f("fk_event_definitions_series_id_event_series"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_definitions")),
        sa.UniqueConstraint("slug", name=op.f("uq_event_definitions_slug")),
    )
    with op.batch_alter_table("event_definitions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_event_definitions_series_id"), ["series_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_event_definitions_state_expanded_until"),
            ["state", "expanded_until"],
            unique=False,
        )

    op.create_table(
        "event_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("definition_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("published_at", UTCDateTime(), nullable=False),
        sa.Column("published_by", sa.String(length=100), nullable=True),
        sa.Column("verified_at", UTCDateTime(), nullable=True),
        sa.Column("verified_by", sa.String(length=100), nullable=True),
        sa.ForeignKeyConstraint(
            ["definition_id"],
            ["event_definitions.id"],
            name=op.f("fk_event_versions_definition_id_event_definitions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_versions")),
        sa.UniqueConstraint(
            "definition_id", "number", name=op.f("uq_event_versions_definition_id_number")
        ),
    )
    op.create_table(
        "event_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("definition_id", sa.Integer(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("scope", sa.String(length=100), server_default="", nullable=False),
        sa.Column("scheduled_for", UTCDateTime(), nullable=False),
        sa.Column("occurrence_local", sa.String(length=16), nullable=True),
        sa.Column("source", sa.String(length=10), nullable=False),
        sa.Column("hold_until", UTCDateTime(), nullable=True),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("health", sa.String(length=10), server_default="ok", nullable=False),
        sa.Column(
            "cleanup_status", sa.String(length=14), server_default="not_required", nullable=False
        ),
        sa.Column("current_phase", sa.String(length=64), nullable=True),
        sa.Column("claimed_by", sa.String(length=100), nullable=True),
        sa.Column("lease_until", UTCDateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("cancel_reason", sa.String(length=200), nullable=True),
        sa.Column("concurrency_key", sa.String(length=100), nullable=True),
        sa.Column(
            "concurrency_lock",
            sa.String(length=100),
            sa.Computed(
                "CASE WHEN status IN ('starting', 'running', 'paused', 'ending') THEN concurrency_key END",
                persisted=True,
            ),
            nullable=True,
        ),
        sa.Column("dst_adjusted", sa.JSON(), nullable=True),
        sa.Column("waiting_reason", sa.String(length=20), nullable=True),
        sa.Column("waiting_since", UTCDateTime(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.Column("ended_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["definition_id"],
            ["event_definitions.id"],
            name=op.f("fk_event_runs_definition_id_event_definitions"),
        ),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["event_versions.id"],
            name=op.f("fk_event_runs_version_id_event_versions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_runs")),
        sa.UniqueConstraint("concurrency_lock", name=op.f("uq_event_runs_concurrency_lock")),
        sa.UniqueConstraint(
            "definition_id",
            "scope",
            "scheduled_for",
            name=op.f("uq_event_runs_definition_id_scope_scheduled_for"),
        ),
    )
    with op.batch_alter_table("event_runs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_event_runs_definition_id_status"),
            ["definition_id", "status"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_event_runs_status_lease_until"), ["status", "lease_until"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_event_runs_status_scheduled_for"),
            ["status", "scheduled_for"],
            unique=False,
        )

    op.create_table(
        "event_run_log",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("phase", sa.String(length=64), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.Column("actor", sa.String(length=100), nullable=True),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["event_runs.id"], name=op.f("fk_event_run_log_run_id_event_runs")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_run_log")),
    )
    with op.batch_alter_table("event_run_log", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_event_run_log_at"), ["at"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_event_run_log_run_id_id"), ["run_id", "id"], unique=False
        )

    op.create_table(
        "event_run_phase_gates",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("phase", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("trigger_id", sa.String(length=200), nullable=True),
        sa.Column("condition", sa.JSON(), nullable=True),
        sa.Column("needed", sa.Integer(), server_default="1", nullable=False),
        sa.Column("tally", sa.Integer(), server_default="0", nullable=False),
        sa.Column("entered_at", UTCDateTime(), nullable=False),
        sa.Column("deadline", UTCDateTime(), nullable=True),
        sa.Column("last_event_at", UTCDateTime(), nullable=True),
        sa.Column("last_event_counted", sa.Boolean(), nullable=True),
        sa.Column("satisfied_at", UTCDateTime(), nullable=True),
        sa.Column("satisfied_by", sa.String(length=10), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["event_runs.id"], name=op.f("fk_event_run_phase_gates_run_id_event_runs")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_run_phase_gates")),
        sa.UniqueConstraint("run_id", "phase", name=op.f("uq_event_run_phase_gates_run_id_phase")),
    )
    with op.batch_alter_table("event_run_phase_gates", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_event_run_phase_gates_satisfied_at_deadline"),
            ["satisfied_at", "deadline"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_event_run_phase_gates_trigger_id_satisfied_at"),
            ["trigger_id", "satisfied_at"],
            unique=False,
        )

    op.create_table(
        "event_run_steps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("phase", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=200), nullable=False),
        sa.Column("action_version", sa.Integer(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("on_failure", sa.String(length=10), nullable=False),
        sa.Column("status", sa.String(length=10), server_default="pending", nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("due_at", UTCDateTime(), nullable=True),
        sa.Column("claimed_by", sa.String(length=100), nullable=True),
        sa.Column("lease_until", UTCDateTime(), nullable=True),
        sa.Column("idempotency_key", sa.String(length=64), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["event_runs.id"], name=op.f("fk_event_run_steps_run_id_event_runs")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_run_steps")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_event_run_steps_idempotency_key")),
        sa.UniqueConstraint(
            "run_id", "phase", "seq", name=op.f("uq_event_run_steps_run_id_phase_seq")
        ),
    )
    with op.batch_alter_table("event_run_steps", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_event_run_steps_status_due_at"), ["status", "due_at"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_event_run_steps_status_lease_until"),
            ["status", "lease_until"],
            unique=False,
        )


def downgrade() -> None:

    with op.batch_alter_table("event_run_steps", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_event_run_steps_status_lease_until"))
        batch_op.drop_index(batch_op.f("ix_event_run_steps_status_due_at"))

    op.drop_table("event_run_steps")
    with op.batch_alter_table("event_run_phase_gates", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_event_run_phase_gates_trigger_id_satisfied_at"))
        batch_op.drop_index(batch_op.f("ix_event_run_phase_gates_satisfied_at_deadline"))

    op.drop_table("event_run_phase_gates")
    with op.batch_alter_table("event_run_log", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_event_run_log_run_id_id"))
        batch_op.drop_index(batch_op.f("ix_event_run_log_at"))

    op.drop_table("event_run_log")
    with op.batch_alter_table("event_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_event_runs_status_scheduled_for"))
        batch_op.drop_index(batch_op.f("ix_event_runs_status_lease_until"))
        batch_op.drop_index(batch_op.f("ix_event_runs_definition_id_status"))

    op.drop_table("event_runs")
    op.drop_table("event_versions")
    with op.batch_alter_table("event_definitions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_event_definitions_state_expanded_until"))
        batch_op.drop_index(batch_op.f("ix_event_definitions_series_id"))

    op.drop_table("event_definitions")
    op.drop_table("event_series")
    op.drop_table("api_tokens")
