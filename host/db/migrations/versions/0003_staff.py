"""staff at work: tokens with a lifecycle, a moved occurrence, participants and results

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 22:50:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pageant.db.types import UTCDateTime

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("created_by", sa.String(length=100), nullable=True))
        batch.add_column(sa.Column("revoked_by", sa.String(length=100), nullable=True))
        batch.add_column(sa.Column("expires_at", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("last_used_at", UTCDateTime(), nullable=True))
    with op.batch_alter_table("event_runs") as batch:
        batch.add_column(sa.Column("moved_from", UTCDateTime(), nullable=True))
    op.create_table(
        "event_run_participants",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("role", sa.String(length=50), nullable=True),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["event_runs.id"],
            name=op.f("fk_event_run_participants_run_id_event_runs"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_run_participants")),
        sa.UniqueConstraint("run_id", "name", name=op.f("uq_event_run_participants_run_id_name")),
    )
    op.create_table(
        "event_run_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.Integer(), nullable=False),
        sa.Column("phase", sa.String(length=64), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("entries", sa.JSON(), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["event_runs.id"], name=op.f("fk_event_run_results_run_id_event_runs")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_run_results")),
        sa.UniqueConstraint("step_id", name=op.f("uq_event_run_results_step_id")),
    )
    op.create_index(
        op.f("ix_event_run_results_run_id"), "event_run_results", ["run_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_event_run_results_run_id"), table_name="event_run_results")
    op.drop_table("event_run_results")
    op.drop_table("event_run_participants")
    with op.batch_alter_table("event_runs") as batch:
        batch.drop_column("moved_from")
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("last_used_at")
        batch.drop_column("expires_at")
        batch.drop_column("revoked_by")
        batch.drop_column("created_by")
