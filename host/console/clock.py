"""One clock per page: the zone every time on a page is drawn in, and the switch that changes it.

A page has one zone, said once at its top (:attr:`PageClock.caption`), and every time on it —
the facts, the sentences, the log's column, the timeline's bars, the calendar's days and
times, the captions and the tooltips — is drawn on the server in that zone. The run and event
pages start on the event's zone; the Now, Runs and Calendar pages on UTC. **Show times in my
zone** posts the browser's zone (its script reads it from ``Intl``) to ``POST /zone``
(:mod:`pageant.console.zone`), which keeps it with the signed-in person's token
(:func:`pageant.access.tokens.choose_zone`); every page then draws every time in it, in every
browser that person signs in from, until **Show times in the event's zone** (or **in UTC**)
clears it. The choice belongs to the person, not to a browser: two people never share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from aiohttp import web

from pageant.console.session import signed_in

#: The cookie that kept a viewer's own zone before the choice moved to the token; the
#: switch deletes it, and nothing reads it.
LEGACY_COOKIE = "pageant_zone"


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
    """The signed-in viewer's own zone, when they chose it (and it is still a zone this host
    knows); None otherwise, and for a viewer who is not signed in."""
    session = signed_in(request)
    name = session.principal.zone if session is not None else None
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
    """The clock of a page: the signed-in viewer's chosen zone, else the event's
    (``event_zone``, on a run's or an event's page), else UTC."""
    default = event_zone if event_zone and known_zone(event_zone) else "UTC"
    words = "the event's zone" if event_zone else "UTC"
    mine = chosen_zone(request)
    return PageClock(
        tz=mine or default, mine=mine is not None, default=default, default_words=words
    )
