"""What an event's announcements will look like: its template rendered for its next
occurrence, and what each built-in leg would send of it.

The API's ``announce-preview`` route and the console editor's preview both answer with
:func:`preview`, and it builds each leg's payload with the very function the leg sends with,
so a preview cannot drift from what a channel receives.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pageant.builtin_plugins.announce_chat import discord_payload, slack_payload
from pageant.builtin_plugins.announce_email import compose
from pageant.events.authoring import announce
from pageant.hookspecs import SendContext
from pageant.schedules.recurrence import next_occurrence
from pageant.support.timefmt import iso

#: The message previewed when the spec holds no step with one.
SAMPLE_MESSAGE = "(the step's message)"


def first_message(spec: Any) -> str:
    """The ``message`` param of the spec's first step that has one, else a placeholder."""
    phases = spec.get("phases") if isinstance(spec, dict) else None
    for phase in phases if isinstance(phases, list) else []:
        steps = phase.get("steps") if isinstance(phase, dict) else None
        for step in steps if isinstance(steps, list) else []:
            params = step.get("params") if isinstance(step, dict) else None
            message = params.get("message") if isinstance(params, dict) else None
            if isinstance(message, str) and message.strip():
                return message
    return SAMPLE_MESSAGE


def _start(schedule: Any, timezone: str, now: datetime) -> tuple[datetime, str]:
    """The next occurrence after ``now``, or ``now`` for an event with none ahead (a manual
    one runs when someone starts it)."""
    try:
        occurrence = (
            next_occurrence(schedule, timezone, now) if isinstance(schedule, dict) else None
        )
    except (ValueError, TypeError, AttributeError):
        occurrence = None  # an incomplete schedule in the editor: preview as if started now
    return (occurrence.at, "next") if occurrence is not None else (now, "now")


def preview(
    *,
    title: str,
    slug: str,
    public: bool,
    timezone: str,
    spec: Mapping[str, Any],
    template: Mapping[str, str] | None,
    message: str | None,
    settings: Any,
    now: datetime,
) -> dict[str, Any]:
    """The announcement ``template`` makes of ``message`` (the spec's first message when
    ``None``) for the event's next occurrence, and each built-in leg's payload.

    ``template`` must be valid (:func:`pageant.events.authoring.announce.validate_template`).
    """
    text = message if message is not None else first_message(spec)
    when, occurrence = _start(spec.get("schedule"), timezone, now)
    facts = announce.Facts(
        title=title, slug=slug, timezone=timezone, scheduled_for=when, public=public
    )
    shown = announce.announcement(template, text, facts, link_pattern=settings.public_page_url)
    ctx = SendContext(
        run=None, step_id=None, idempotency_key="preview", deadline=now, announcement=shown
    )
    mail = compose(shown.body, ctx, settings)
    return {
        "message": text,
        "occurrence": occurrence,
        "title": shown.title,
        "body": shown.body,
        "link": shown.link,
        "when": iso(shown.when),
        "when_text": shown.when_text,
        "timezone": shown.timezone,
        "legs": {
            "core.email": {"subject": mail["Subject"], "text": mail.get_content()},
            "core.discord": discord_payload(shown),
            "core.slack": slack_payload(shown),
        },
    }
