"""One clock per page: the zone every time on a page is drawn in, and the switch that changes it.

A page has one zone, said once at its top (:attr:`PageClock.caption`), and every time on it —
the facts, the sentences, the log's column, the timeline's bars, the captions and the
tooltips — is drawn on the server in that zone. The run and event pages start on the event's
zone, the runs list on UTC. **Show times in my zone** posts the browser's zone (its script
reads it from ``Intl``) to ``POST /zone`` (:mod:`pageant.console.zone`), which keeps it in a
cookie for a year; every page then draws every time in it, until **Show times in the event's
zone** (or **in UTC**) clears it. The choice lives in the browser it was made in, across
pages and reloads. (The calendar still shows each occurrence on its event's own clock.)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from aiohttp import web

#: The cookie that keeps a viewer's own zone (an IANA name); absent, each page's default.
COOKIE = "pageant_zone"
#: How long the choice is kept: a year.
MAX_AGE = 365 * 24 * 3600


@lru_cache(maxsize=64)
def known_zone(name: str) -> bool:
    """Whether ``name`` is an IANA zone this machine knows (``UTC`` included)."""
    if not name or len(name) > 64 or not name.isascii() or ".." in name:
        return False
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def chosen_zone(request: web.Request) -> str | None:
    """The viewer's own zone, when they chose it (and it is a zone); None otherwise."""
    name = request.cookies.get(COOKIE)
    return name if name and known_zone(name) else None


@dataclass(frozen=True)
class PageClock:
    """The zone a page draws every time in, and how the page says so."""

    tz: str
    #: True when the zone is the viewer's own choice.
    mine: bool
    #: The page's own zone, used when the viewer has not chosen theirs.
    default: str
    #: How the page names its own zone: ``the event's zone`` or ``UTC``.
    default_words: str

    @property
    def caption(self) -> str:
        if self.mine:
            return f"Times are in your zone, {self.tz}."
        if self.default_words == "UTC":
            return "Times are in UTC."
        return f"Times are in {self.default_words}, {self.tz}."

    @property
    def back_words(self) -> str:
        """What the switch offers while the viewer's zone is on."""
        return "UTC" if self.default_words == "UTC" else self.default_words


def page_clock(request: web.Request, event_zone: str | None = None) -> PageClock:
    """The clock of a page: the viewer's chosen zone, else the event's (``event_zone``, on a
    run's or an event's page), else UTC."""
    default = event_zone if event_zone and known_zone(event_zone) else "UTC"
    words = "the event's zone" if event_zone else "UTC"
    mine = chosen_zone(request)
    return PageClock(
        tz=mine or default, mine=mine is not None, default=default, default_words=words
    )
