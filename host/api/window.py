"""A calendar window from the query: ``?from=&to=``, two instants with an offset.

One reading for every calendar (the staff calendar requires both ends; the public one
fills in what is absent), so the two answer a bad window with the same words.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from aiohttp import web

from pageant.schedules import calendar
from pageant.support.timefmt import OutOfRange, parse_instant


def instant(
    request: web.Request, name: str, problems: list[str], *, default: datetime | None = None
) -> datetime | None:
    """The query parameter ``name`` as an aware instant. Absent, it is ``default``, or -
    with no default - a problem; blank, unparsable or without an offset, a problem.
    Problems are appended to ``problems`` as ``query.<name>: ...``."""
    raw = request.query.get(name)
    if raw is None and default is not None:
        return default
    if raw is None or not raw.strip():
        problems.append(
            f"query.{name}: required, an instant with an offset such as 2027-03-26T19:00:00Z"
        )
        return None
    try:
        return parse_instant(raw)
    except OutOfRange as exc:
        problems.append(f"query.{name}: {exc}")
        return None
    except ValueError:
        problems.append(
            f"query.{name}: {raw!r} is not an instant with an offset; "
            "expected e.g. 2027-03-26T19:00:00Z or 2027-03-26T20:00:00+01:00"
        )
        return None


def read_window(
    request: web.Request,
    problems: list[str],
    *,
    default_start: datetime | None = None,
    default_span: timedelta | None = None,
) -> tuple[datetime | None, datetime | None]:
    """``(from, to)`` from the query, the window's own rules checked: ``to`` later than
    ``from`` and at most :data:`pageant.schedules.calendar.MAX_WINDOW` after it.

    Without defaults both ends are required. With them, an absent ``from`` is
    ``default_start`` and an absent ``to`` is ``from + default_span``. Every problem is
    appended to ``problems``; an end that could not be read answers None.
    """
    start = instant(request, "from", problems, default=default_start)
    end_given = "to" in request.query
    if default_span is not None and not end_given:
        end = start + default_span if start is not None else None
    else:
        end = instant(request, "to", problems)
    if start is not None and end is not None:
        if end <= start:
            problems.append("query.to: must be later than query.from")
        elif end - start > calendar.MAX_WINDOW:
            problems.append(
                f"query.to: must be at most {calendar.MAX_WINDOW.days} days after query.from; "
                f"this window is {end - start}"
            )
    return start, end
