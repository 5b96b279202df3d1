"""blackouts: named, shared calendars of periods that subscribed events do not run in

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07 18:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pageant.db.types import UTCDateTime

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_blackouts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slug", sa.String(length=100), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("periods", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=10), server_default="active", nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_blackouts")),
        sa.UniqueConstraint("slug", name=op.f("uq_event_blackouts_slug")),
    )


def downgrade() -> None:
    op.drop_table("event_blackouts")
