"""the console's clock per person: the zone a token's holder chose

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07 15:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        # NULL on every token made before: its pages keep their own zones.
        batch_op.add_column(sa.Column("zone", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_column("zone")
