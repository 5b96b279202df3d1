"""run params, the gates' match key, firing keys and each trigger's last firing

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 09:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pageant.db.types import UTCDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("event_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("params", sa.JSON(), nullable=True))
    with op.batch_alter_table("event_run_phase_gates", schema=None) as batch_op:
        # '' for a gate no single equality narrows: every firing of its trigger is judged.
        batch_op.add_column(
            sa.Column("match_key", sa.String(length=255), server_default="", nullable=False)
        )
        batch_op.create_index(
            batch_op.f("ix_event_run_phase_gates_trigger_id_match_key_satisfied_at"),
            ["trigger_id", "match_key", "satisfied_at"],
        )
    op.create_table(
        "trigger_firing_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("issuer", sa.String(length=100), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("trigger_id", sa.String(length=200), nullable=False),
        sa.Column("answer", sa.JSON(), nullable=True),
        sa.Column("fired_at", UTCDateTime(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trigger_firing_keys")),
        sa.UniqueConstraint("issuer", "key", name=op.f("uq_trigger_firing_keys_issuer_key")),
    )
    with op.batch_alter_table("trigger_firing_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_trigger_firing_keys_created_at"), ["created_at"])
    op.create_table(
        "trigger_last_firings",
        sa.Column("trigger_id", sa.String(length=200), nullable=False),
        sa.Column("last_at", UTCDateTime(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("trigger_id", name=op.f("pk_trigger_last_firings")),
    )


def downgrade() -> None:
    op.drop_table("trigger_last_firings")
    with op.batch_alter_table("trigger_firing_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_trigger_firing_keys_created_at"))
    op.drop_table("trigger_firing_keys")
    with op.batch_alter_table("event_run_phase_gates", schema=None) as batch_op:
        batch_op.drop_index(
            batch_op.f("ix_event_run_phase_gates_trigger_id_match_key_satisfied_at")
        )
        batch_op.drop_column("match_key")
    with op.batch_alter_table("event_runs", schema=None) as batch_op:
        batch_op.drop_column("params")
