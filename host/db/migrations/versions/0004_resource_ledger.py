"""the resource ledger: event_run_resources

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 23:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pageant.db.types import UTCDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

HOLDING_SQL = "status IN ('pending', 'confirmed', 'revert_failed')"


def upgrade() -> None:
    op.create_table(
        "event_run_resources",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.Integer(), nullable=True),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=120), nullable=False),
        sa.Column("ref", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=14), nullable=False),
        sa.Column(
            "holding",
            sa.Integer(),
            sa.Computed(f"CASE WHEN {HOLDING_SQL} THEN 1 END", persisted=True),
            nullable=True,
        ),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("lease_until", UTCDateTime(), nullable=True),
        sa.Column("revert_attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["event_runs.id"], name=op.f("fk_event_run_resources_run_id_event_runs")
        ),
        sa.ForeignKeyConstraint(
            ["step_id"],
            ["event_run_steps.id"],
            name=op.f("fk_event_run_resources_step_id_event_run_steps"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_run_resources")),
    )
    with op.batch_alter_table("event_run_resources", schema=None) as batch_op:
        batch_op.create_index(
            "uq_event_run_resources_holding_key",
            ["owner", "kind", "ref", "holding"],
            unique=True,
            sqlite_where=sa.text(HOLDING_SQL),
        )
        batch_op.create_index(
            batch_op.f("ix_event_run_resources_holding_run_id"), ["holding", "run_id"]
        )
        batch_op.create_index(batch_op.f("ix_event_run_resources_run_id_id"), ["run_id", "id"])


def downgrade() -> None:
    op.drop_table("event_run_resources")
