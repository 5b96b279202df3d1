"""catch-up: a run the event's catch-up policy lets start after its grace window

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07 18:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("event_runs", schema=None) as batch_op:
        # NULL on every run made before: none of them was caught up.
        batch_op.add_column(sa.Column("catch_up", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("event_runs", schema=None) as batch_op:
        batch_op.drop_column("catch_up")
