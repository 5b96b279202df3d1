"""The expand leg: every ``ready`` definition's recurrence into ``scheduled`` runs.

The schedules feature fills this in (recurrence, the horizon, re-pinning on publish); until
then manual starts are the only runs and the leg has nothing to do.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pageant.hosting import Host


async def expand(host: Host, now: datetime) -> None:
    """Materialise scheduled occurrences up to the horizon (filled by the schedules feature)."""
    return None
