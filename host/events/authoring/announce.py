"""An event's announcement template: what every announce leg sends for one of its runs.

A spec may carry ``announce: {"title": ..., "body": ...}``; each is a text with placeholders
in braces, drawn from :data:`PLACEHOLDERS` only::

    {"title": "{title} tonight", "body": "{message}\\nStarts {when}. {link}"}

Without one, the title is the event's title and the body the step's message as written, so
an event that never set a template announces exactly what it did before.

The grammar is :meth:`str.format`'s braces with every other power taken away: a placeholder
is a bare name from the list (no ``{title.upper}``, no ``{0}``, no ``!r`` or ``:>20``), and
``{{``/``}}`` write a brace. Rendering substitutes strings into a parsed list, so it cannot
loop, reach an attribute or run for longer than the text is long; an editor may write a
template, and a template is rendered by the engine on every announcement. (A Jinja2 sandbox
would also refuse attribute access, but it still offers loops and filters nobody needs in a
one-paragraph message, and a loop is a way to make a render expensive.)

:func:`validate_template` is the spec validator's check, with the place in every message;
:func:`announcement` renders a template into the contract's
:class:`~pageant.hookspecs.Announcement`.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from pageant.hookspecs import Announcement
from pageant.support.refusals import an_object, refuse_unknown, show

#: The placeholders a template may use, each with what it becomes.
PLACEHOLDERS: dict[str, str] = {
    "title": "the event's title",
    "message": "the step's message, as its params say",
    "when": "when the run was scheduled to start, in the event's time zone "
    "(Fri 4 Dec 2026, 20:00 CET)",
    "timezone": "the event's time zone (Europe/Berlin)",
    "link": 'the event\'s public page ("" for a staff-only event or without public_page_url)',
    "phase": "the key of the phase the step belongs to",
    "scope": 'the run\'s scope ("" when it has none)',
}
TEMPLATE_KEYS = ("title", "body")
DEFAULT_TEMPLATE: dict[str, str] = {"title": "{title}", "body": "{message}"}
#: A title is one line (an email subject, a chat embed's title); a body a few paragraphs.
MAX_TITLE = 200
MAX_BODY = 2000
_MAX = {"title": MAX_TITLE, "body": MAX_BODY}

#: A parsed template: literal text and placeholder names, in order.
Parsed = list[tuple[str, str | None]]


def parse(text: str) -> Parsed:
    """``text`` as literal runs and placeholder names; raises ``ValueError`` saying what is
    wrong with it (an unknown name, a format spec, an unmatched brace)."""
    parts: Parsed = []
    try:
        pieces = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ValueError(f"{exc} (write {{{{ or }}}} for a brace)") from None
    for literal, name, spec, conversion in pieces:
        if name is None:
            parts.append((literal, None))
            continue
        if conversion or spec:
            raise ValueError(f"{{{name}}} has a conversion or a format; write a bare {{{name}}}")
        if name not in PLACEHOLDERS:
            raise ValueError(
                f"{{{name}}} is not a placeholder; expected one of "
                + ", ".join("{" + known + "}" for known in PLACEHOLDERS)
            )
        parts.append((literal, name))
    return parts


@functools.lru_cache(maxsize=256)
def _parsed(text: str) -> tuple[tuple[str, str | None], ...]:
    # An event's templates are few and an announce step renders one every time it runs.
    return tuple(parse(text))


def render(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each placeholder replaced by its value (a template already validated;
    ``ValueError`` otherwise)."""
    return "".join(
        literal + ("" if name is None else values.get(name, "")) for literal, name in _parsed(text)
    )


def validate_template(raw: Any, path: str, errors: list[str]) -> dict[str, str] | None:
    """The spec's ``announce`` checked: ``None`` when absent, else the template with only
    the keys it was given; every problem goes to ``errors`` prefixed by its place
    (``spec.announcement.body: {starts} is not a placeholder; ...``)."""
    if raw is None:
        return None
    if (raw := an_object(raw, path, errors, "with title and/or body")) is None:
        return None
    refuse_unknown(raw, TEMPLATE_KEYS, path, errors)
    out: dict[str, str] = {}
    for key in TEMPLATE_KEYS:
        if key not in raw:
            continue
        value, where = raw[key], f"{path}.{key}"
        if not isinstance(value, str):
            errors.append(f"{where}: expected a string; got {show(value)}")
            continue
        if not value.strip():
            errors.append(f"{where}: must not be empty (leave it out for the default)")
            continue
        if len(value) > _MAX[key]:
            errors.append(f"{where}: at most {_MAX[key]} characters; got {len(value)}")
            continue
        if key == "title" and ("\n" in value or "\r" in value):
            errors.append(f"{where}: a title is one line; it holds a line break")
            continue
        try:
            parse(value)
        except ValueError as exc:
            errors.append(f"{where}: {exc}")
            continue
        out[key] = value
    return out


@dataclass(frozen=True)
class Facts:
    """What a template may say of one run: its event, its time and where it is shown."""

    title: str
    slug: str
    timezone: str
    scheduled_for: datetime | None
    public: bool
    phase: str = ""
    scope: str = ""


def when_text(instant: datetime, timezone: str) -> str:
    """``instant`` as a player reads it in ``timezone``: ``Fri 4 Dec 2026, 20:00 CET``.

    Written from numbers and fixed English names, never the process's locale."""
    local = instant.astimezone(ZoneInfo(timezone))
    day = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")[local.weekday()]
    month = (
        "Jan",
        "Feb",
        "Mar",
        "Apr",
        "May",
        "Jun",
        "Jul",
        "Aug",
        "Sep",
        "Oct",
        "Nov",
        "Dec",
    )[local.month - 1]
    return f"{day} {local.day} {month} {local.year}, {local:%H:%M} {local.tzname()}"


def page_link(pattern: str, slug: str, public: bool) -> str:
    """The public page of the event ``slug`` from the ``public_page_url`` setting, or ``""``
    when there is no page a player may open (a staff-only event, no setting)."""
    return pattern.replace("{slug}", slug) if pattern and public else ""


def announcement(
    template: Mapping[str, str] | None, message: str, facts: Facts, *, link_pattern: str
) -> Announcement:
    """The announcement ``template`` (the spec's ``announce``, or ``None``) makes of
    ``message`` for the run ``facts`` describe."""
    chosen = {**DEFAULT_TEMPLATE, **(template or {})}
    when = facts.scheduled_for.astimezone(UTC) if facts.scheduled_for is not None else None
    written = when_text(when, facts.timezone) if when is not None else ""
    values = {
        "title": facts.title,
        "message": message,
        "when": written,
        "timezone": facts.timezone,
        "link": page_link(link_pattern, facts.slug, facts.public),
        "phase": facts.phase,
        "scope": facts.scope,
    }
    return Announcement(
        # One line, whatever the values hold: a title becomes an email's Subject header.
        title=" ".join(render(chosen["title"], values).split()),
        body=render(chosen["body"], values),
        link=values["link"],
        when=when,
        when_text=written,
        timezone=facts.timezone,
    )
