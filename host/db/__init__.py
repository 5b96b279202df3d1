"""Storage: tables, the async engine for SQLite and MariaDB, and Alembic migrations."""
