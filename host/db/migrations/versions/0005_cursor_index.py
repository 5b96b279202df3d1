"""the cursor's index: event_run_steps (run_id, phase, status, seq)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 22:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("event_run_steps", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_event_run_steps_run_id_phase_status_seq"),
            ["run_id", "phase", "status", "seq"],
        )


def downgrade() -> None:
    with op.batch_alter_table("event_run_steps", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_event_run_steps_run_id_phase_status_seq"))
