"""what a run does when its concurrency key is still held: the event's overlap policy

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07 18:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("event_definitions", schema=None) as batch_op:
        # 'hold' on every event made before: a held key keeps waiting, as it always did.
        batch_op.add_column(
            sa.Column("overlap", sa.String(length=10), nullable=False, server_default="hold")
        )


def downgrade() -> None:
    with op.batch_alter_table("event_definitions", schema=None) as batch_op:
        batch_op.drop_column("overlap")
