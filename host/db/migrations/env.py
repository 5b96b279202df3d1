"""Alembic environment: always handed a live connection by ``pageant.db.migrate``."""

from __future__ import annotations

from alembic import context

from pageant.db.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `pageant db upgrade`, which supplies the connection")

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
