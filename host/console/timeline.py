"""A run drawn on one time axis: its phases and steps as bars, the waits between them.

Drawn on the server. Each row is an inline SVG whose bars are placed by attributes (the
pages' Content-Security-Policy allows no inline style), stretched to the row's width; the
row's label says the same times in words, so nothing is told by position or colour alone.

:func:`ticks` is also the rehearsal's axis: a few round instants (every 2 s, 5 min, 1 h...)
labelled by how long after the start each is.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

from markupsafe import Markup, escape

from pageant.schedules.recurrence import zone


@lru_cache(maxsize=64)
def zone_of(name: str) -> Any:
    """:func:`~pageant.schedules.recurrence.zone`, remembered: a long run's page converts a
    thousand instants in one zone, and checking its name against the IANA list each time
    was the largest part of that."""
    return zone(name)


#: The SVG's user units across the axis.
WIDTH = 1000
#: Round steps for the axis's ticks, in seconds.
STEPS = (
    0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30,
    60, 120, 300, 600, 900, 1800,
    3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800,
)  # fmt: skip
#: At most this many ticks on an axis.
MAX_TICKS = 7


def duration(seconds: float | None) -> str:
    """``0 s``, ``45 s``, ``5 min``, ``1 h 30 min``, ``2 d 3 h`` (empty for None)."""
    if seconds is None:
        return ""
    total = round(seconds)
    if total < 60:
        return f"{total} s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes} min" + (f" {secs} s" if secs else "")
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    days, hours = divmod(hours, 24)
    return f"{days} d" + (f" {hours} h" if hours else "")


def span_words(seconds: float | None) -> str:
    """``0.4 s``, ``12 s``, ``5 min 3 s``, ``1 h 30 min``: how long, in words (empty for
    None); under ten seconds keeps a tenth."""
    if seconds is not None and seconds < 10 and round(seconds, 1) != round(seconds):
        return f"{seconds:.1f} s"
    return duration(seconds)


def ticks(span: float) -> list[dict[str, Any]]:
    """Round offsets from 0 to ``span`` seconds, each ``{x, seconds, words}`` (``x`` in
    whole percent of the axis): the smallest round step that gives at most
    :data:`MAX_TICKS` of them."""
    span = max(span, 0.1)
    step = next((s for s in STEPS if span / s <= MAX_TICKS - 1), STEPS[-1])
    out = []
    k = 0
    while k * step <= span + 1e-9:
        at = k * step
        out.append({"x": round(at / span * 100), "seconds": at, "words": span_words(at)})
        k += 1
    return out


def _x(at: datetime | None, start: datetime, span: float) -> float:
    if at is None:
        return WIDTH
    return max(0.0, min(WIDTH, (at - start).total_seconds() / span * WIDTH))


def _clock(at: datetime | None, tz: str) -> str:
    if at is None:
        return ""
    return at.astimezone(zone_of(tz)).strftime("%H:%M:%S")


def _bar(
    begin: datetime | None, end: datetime | None, start: datetime, span: float
) -> dict[str, float]:
    left = _x(begin or start, start, span)
    right = _x(end, start, span)
    return {"x": round(left, 1), "w": round(max(right - left, 3.0), 1)}


def _row_html(row: dict[str, Any], grid: str) -> Markup:
    """One row of the timeline: its label and times in words, and its bars."""
    phase = row["kind"] == "phase"
    label = f"<strong>{escape(row['label'])}</strong>" if phase else str(escape(row["label"]))
    words = f"{escape(row['state'])} · {row['from']}\u2013{row['to'] or 'now'} · {row['took']}"
    if row["wait"]:
        words += f" · {escape(row['wait']['words'])}"
    bar = row["bar"]
    state = escape(str(row["state"]).replace(" ", "-"))
    height, top = (14, 3) if phase else (8, 6)
    wait = ""
    if row["wait"]:
        w = row["wait"]
        wait = f'<rect class="tlr-wait" x="{w["x"]}" y="3" width="{w["w"]}" height="14"/>'
    return Markup(
        f'<li class="tlr-row tlr-{row["kind"]}"><span class="tlr-label">{label}'
        f' <span class="help">{words}</span></span>'
        f'<svg class="tlr-track" viewBox="0 0 {WIDTH} 20" preserveAspectRatio="none"'
        f' aria-hidden="true" focusable="false">{grid}'
        f'<rect class="tlr-bar s-{state}{" open" if row["open"] else ""}" x="{bar["x"]}"'
        f' y="{top}" width="{bar["w"]}" height="{height}" rx="2"/>{wait}</svg></li>'
    )


def draw(
    run: dict[str, Any],
    phases: list[dict[str, Any]],
    gates: dict[str, dict[str, Any]],
    *,
    now: datetime,
    tz: str,
) -> dict[str, Any] | None:
    """The rows of a run's timeline, or None before it started. ``phases`` are the page's
    (each with its made ``steps``); ``gates`` each phase's gate row by phase key.

    A phase's bar runs from when it was entered (its gate's ``entered_at``, else its first
    step's start) to when it was left (its gate's ``satisfied_at``, else its last step's
    finish; a phase still going runs to now). The wait of a phase is the part of it after
    its last step finished, while its gate was still open."""
    start = run.get("started_at")
    if start is None:
        return None
    end = run.get("ended_at") or now
    span = max((end - start).total_seconds(), 1.0)
    rows: list[dict[str, Any]] = []
    for number, phase in enumerate(phases, 1):
        made = phase["steps"]
        gate = gates.get(phase["key"])
        began = [st["started_at"] for st in made if st["started_at"] is not None]
        finished = [st["finished_at"] for st in made if st["finished_at"] is not None]
        entered = gate["entered_at"] if gate else (min(began) if began else None)
        if entered is None:
            continue
        all_done = bool(made) and len(finished) == len(made)
        if gate and gate["satisfied_at"] is not None:
            left = gate["satisfied_at"]
        elif not gate and all_done:
            left = max(finished)
        else:
            left = None if run.get("ended_at") is None else run["ended_at"]
        open_end = left is None
        wait = None
        if gate is not None:
            steps_done = max(finished) if all_done else (entered if not made else None)
            if steps_done is not None:
                upto = gate["satisfied_at"] or left
                what = (
                    f"gate: after {span_words(gate['deadline'].timestamp() - entered.timestamp())}"
                    if gate["kind"] == "after" and gate["deadline"] is not None
                    else f"gate: on {gate['trigger_id']}, {gate['tally']} of {gate['needed']}"
                )
                wait = {**_bar(steps_done, upto, start, span), "words": what, "open": upto is None}
        rows.append(
            {
                "kind": "phase",
                "label": f"Phase {number}: {phase['label']}",
                "state": phase["state"],
                "bar": _bar(entered, left, start, span),
                "wait": wait,
                "open": open_end,
                "from": _clock(entered, tz),
                "to": _clock(left, tz),
                "took": span_words(((left or now) - entered).total_seconds()),
            }
        )
        for st in made:
            if st["started_at"] is None:
                continue
            stop = st["finished_at"]
            rows.append(
                {
                    "kind": "step",
                    "label": f"step {st['id']} ({st['label']})",
                    "state": "parked" if st["parked"] else st["status"],
                    "bar": _bar(st["started_at"], stop, start, span),
                    "wait": None,
                    "open": stop is None,
                    "from": _clock(st["started_at"], tz),
                    "to": _clock(stop, tz),
                    "took": span_words(((stop or now) - st["started_at"]).total_seconds()),
                }
            )
    marks = ticks(span)
    # The ticks' lines, the same in every row: drawn once.
    grid = "".join(
        f'<line class="tlr-tick" x1="{t["x"] * 10}" x2="{t["x"] * 10}" y1="0" y2="20"/>'
        for t in marks
    )
    return {
        "rows": rows,
        # A long run has hundreds of rows: each is written here, in one pass, not by the
        # template's loop (a run of 500 steps drew in a third of the time).
        "html": Markup("\n").join(_row_html(row, grid) for row in rows),
        "ticks": marks,
        "from": _clock(start, tz),
        "to": _clock(run.get("ended_at"), tz) or "now",
        "span": span_words(span),
        "width": WIDTH,
    }
