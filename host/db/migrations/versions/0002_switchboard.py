"""the switchboard, per-run budgets and what each step spent

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 23:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pageant.db.types import UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_action_settings",
        sa.Column("action_id", sa.String(length=200), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("caps", sa.JSON(), nullable=False),
        sa.Column("updated_by", sa.String(length=100), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("action_id", name=op.f("pk_event_action_settings")),
    )
    op.create_table(
        "event_action_settings_history",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("action_id", sa.String(length=200), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("caps", sa.JSON(), nullable=False),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("actor", sa.String(length=100), nullable=True),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_action_settings_history")),
    )
    with op.batch_alter_table("event_action_settings_history", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_event_action_settings_history_action_id_id"),
            ["action_id", "id"],
            unique=False,
        )
    op.create_table(
        "event_run_budget",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("dimension", sa.String(length=200), nullable=False),
        sa.Column("cap", sa.Integer(), nullable=True),
        sa.Column("consumed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("cap_source_action", sa.String(length=200), nullable=True),
        sa.Column("actions", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["event_runs.id"], name=op.f("fk_event_run_budget_run_id_event_runs")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_run_budget")),
        sa.UniqueConstraint(
            "run_id", "dimension", name=op.f("uq_event_run_budget_run_id_dimension")
        ),
    )
    with op.batch_alter_table("event_run_steps", schema=None) as batch_op:
        batch_op.add_column(sa.Column("spent", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("event_run_steps", schema=None) as batch_op:
        batch_op.drop_column("spent")
    op.drop_table("event_run_budget")
    with op.batch_alter_table("event_action_settings_history", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_event_action_settings_history_action_id_id"))
    op.drop_table("event_action_settings_history")
    op.drop_table("event_action_settings")
