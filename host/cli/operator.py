"""What an operator is told when pageant cannot start: one line, what is wrong and the fix.

Each function turns one known failure (a busy port, a database out of reach, a SQLite
folder that is not there, a schema Alembic cannot place) into an :class:`OperatorError`,
which the command line prints as ``error: ...`` and exits 1 with - never a traceback.
"""

from __future__ import annotations

import errno
from pathlib import Path

from pageant.cli.running import host_elsewhere
from pageant.db.engine import is_relative_sqlite, shown_url, sqlite_file
from pageant.errors import PageantError


class OperatorError(PageantError):
    """A problem an operator fixes outside pageant; ``message`` says what and how."""

    code = "operator"


def check_sqlite_folder(url: str) -> None:
    """Refuse a SQLite file whose folder does not exist (SQLite would say only "unable to
    open database file")."""
    path = sqlite_file(url)
    if path is None:
        return
    folder = Path(path).expanduser().absolute().parent
    if not folder.is_dir():
        raise OperatorError(
            f"the folder {str(folder)!r} of the SQLite database does not exist; create it "
            "or point --database-url (PAGEANT_DATABASE_URL) at a file in an existing folder"
        )


def check_sqlite_exists(url: str) -> None:
    """Refuse a SQLite file that is not there: every command but ``db upgrade`` works on a
    database that exists, and SQLite would otherwise create an empty one wherever a typo in
    the URL points (and the command then answer from it, or fail on its missing schema)."""
    check_sqlite_folder(url)
    path = sqlite_file(url)
    if path is None or Path(path).expanduser().exists():
        return
    if is_relative_sqlite(url):
        # A relative URL opens a file in whatever folder the command runs in: from another
        # folder than the host's, `db upgrade` would make a second, empty database.
        here = Path(path).expanduser().absolute()
        elsewhere = host_elsewhere(here)
        if elsewhere is not None:
            verb = "started in" if elsewhere.running else "last ran in"
            uses = "uses" if elsewhere.running else "used"
            raise OperatorError(
                f"no database at {here}; the host you {verb} {elsewhere.folder} {uses} "
                f"{elsewhere.database}? Run this command in {elsewhere.folder}, or give "
                f"--database-url (PAGEANT_DATABASE_URL) sqlite:///{elsewhere.database}"
            )
        raise OperatorError(
            f"there is no database at {str(here)!r}: the URL names {path!r} relative to the "
            f"folder this command runs in ({str(Path.cwd())!r}); a host started in another "
            "folder uses the file there. Run this command in that folder, or give "
            "--database-url (PAGEANT_DATABASE_URL) the absolute path; `pageant db upgrade` "
            "here would create a second, empty database"
        )
    raise OperatorError(
        f"the SQLite database {path!r} does not exist; create it with `pageant db upgrade`, "
        "or point --database-url (PAGEANT_DATABASE_URL) at the existing file"
    )


def newer_schema(current: str) -> OperatorError:
    """The database's schema is at a revision this pageant does not know."""
    return OperatorError(
        f"a newer pageant migrated this database's schema to revision {current!r}, which this "
        "pageant does not know; install that newer pageant, or restore the backup taken "
        "before its upgrade"
    )


def unreachable(url: str, exc: BaseException) -> OperatorError:
    """The database at ``url`` did not answer (or refused the login)."""
    reason = _root_cause(exc)
    return OperatorError(
        f"cannot reach the database at {shown_url(url)}: {reason}; check that the server "
        "is running and the URL, user and password (--database-url, PAGEANT_DATABASE_URL)"
    )


def port_in_use(address: str, port: int, exc: OSError) -> OperatorError:
    if exc.errno == errno.EADDRINUSE:
        why = "the address is already in use (another pageant, or another program, holds it)"
    elif exc.errno == errno.EACCES:
        why = "permission denied (ports below 1024 need privileges)"
    else:
        why = exc.strerror or str(exc)
    return OperatorError(
        f"cannot listen on {address}:{port}: {why}; stop the other process or choose "
        "another --port (PAGEANT_PORT) or --host (PAGEANT_HOST)"
    )


def _root_cause(exc: BaseException) -> str:
    seen: BaseException = exc
    while True:
        inner = getattr(seen, "orig", None) or seen.__cause__
        if inner is None or inner is seen:
            break
        seen = inner
    text = str(seen).strip().splitlines()[0] if str(seen).strip() else type(seen).__name__
    return text[:300]
