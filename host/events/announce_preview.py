"""What an event's announcements will look like: its template rendered for its next
occurrence, and what each announce leg that offers a preview would send of it.

The API's ``announce-preview`` route and the console editor's preview both answer with
:func:`preview`. It asks every registered leg with a ``preview`` (a built-in's or a
plugin's alike, contract 1.5) through the registry; a leg builds its preview with the very
function it sends with, so a preview cannot drift from what a channel receives.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pageant.events.authoring import announce
from pageant.hookspecs import AnnounceLeg, Announcement
from pageant.schedules.recurrence import next_occurrence
from pageant.support.timefmt import iso

#: The most JSON one leg's preview may answer; a larger answer is shown as its error.
MAX_PREVIEW_BYTES = 64 * 1024

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


def leg_preview(leg: AnnounceLeg, shown: Announcement) -> dict[str, Any]:
    """What ``leg`` says it would send of ``shown``, or ``{"error": why}`` when its preview
    raised or answered something that is not a JSON object of at most
    :data:`MAX_PREVIEW_BYTES`: a plugin's preview failing shows as its own entry, never
    as a failed preview of the others."""
    assert leg.preview is not None
    try:
        answer = leg.preview(shown)
    except Exception as exc:  # a plugin's preview failing is its own problem
        return {"error": f"{leg.id}'s preview raised {type(exc).__name__}: {exc}"}
    if not isinstance(answer, Mapping):
        return {"error": f"{leg.id}'s preview answered {type(answer).__name__}, not a mapping"}
    try:
        text = json.dumps(answer, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return {"error": f"{leg.id}'s preview answered something not JSON: {exc}"}
    if len(text.encode()) > MAX_PREVIEW_BYTES:
        return {"error": f"{leg.id}'s preview answered more than {MAX_PREVIEW_BYTES} bytes of JSON"}
    loaded: dict[str, Any] = json.loads(text)
    return loaded


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
    legs: Mapping[str, AnnounceLeg],
    now: datetime,
) -> dict[str, Any]:
    """The announcement ``template`` makes of ``message`` (the spec's first message when
    ``None``) for the event's next occurrence, and the preview of each of ``legs`` (the
    registry's) that offers one, by id.

    ``template`` must be valid (:func:`pageant.events.authoring.announce.validate_template`).
    """
    text = message if message is not None else first_message(spec)
    when, occurrence = _start(spec.get("schedule"), timezone, now)
    facts = announce.Facts(
        title=title, slug=slug, timezone=timezone, scheduled_for=when, public=public
    )
    shown = announce.announcement(template, text, facts, link_pattern=settings.public_page_url)
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
            leg_id: leg_preview(leg, shown)
            for leg_id, leg in sorted(legs.items())
            if leg.preview is not None
        },
    }
