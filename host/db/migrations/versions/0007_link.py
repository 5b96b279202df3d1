"""the game link: game tokens bound to servers and owners, its commands and servers

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-07 05:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pageant.db.types import UTCDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        # NULL on every token made before: it keeps firing what it fired.
        batch_op.add_column(sa.Column("servers", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("owners", sa.JSON(), nullable=True))
    op.create_table(
        "link_commands",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("server", sa.String(length=100), nullable=False),
        sa.Column("owner", sa.String(length=100), nullable=False),
        sa.Column("command", sa.String(length=100), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("withdrawn_as", sa.String(length=20), nullable=True),
        sa.Column("deadline", UTCDateTime(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("delivered_at", UTCDateTime(), nullable=True),
        sa.Column("deliveries", sa.Integer(), server_default="0", nullable=False),
        sa.Column("answered_at", UTCDateTime(), nullable=True),
        sa.Column("answer", sa.JSON(), nullable=True),
        sa.Column("late", sa.Boolean(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_link_commands")),
        sa.UniqueConstraint(
            "server", "command", "key", name=op.f("uq_link_commands_server_command_key")
        ),
    )
    with op.batch_alter_table("link_commands", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_link_commands_server_status"), ["server", "status"])
        batch_op.create_index(
            batch_op.f("ix_link_commands_status_deadline"), ["status", "deadline"]
        )
    op.create_table(
        "link_servers",
        sa.Column("server", sa.String(length=100), nullable=False),
        sa.Column("last_sync_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("server", name=op.f("pk_link_servers")),
    )


def downgrade() -> None:
    op.drop_table("link_servers")
    op.drop_table("link_commands")
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_column("owners")
        batch_op.drop_column("servers")
