"""A rehearsal's report arranged to be drawn: every phase and step on one time axis.

The report is :func:`pageant.engine.rehearsal.rehearse`'s (every ``*_seconds`` an offset from
the virtual start). The page draws it with plain HTML and CSS: each bar's left edge and width
are whole percentages of the axis, as classes (``l-0`` … ``l-100``, ``w-0`` … ``w-100`` in
``console.css``), since the pages' Content-Security-Policy allows no inline style. Every bar
also says its times in words, so nothing is told by position alone; the axis is labelled at
round offsets (:func:`pageant.console.timeline.ticks`).
"""

from __future__ import annotations

from typing import Any

from pageant.console.timeline import span_words, ticks


def _pct(value: float, span: float) -> int:
    return max(0, min(100, round(value / span * 100)))


def _bar(start: float | None, end: float | None, span: float) -> dict[str, Any]:
    """Where a bar sits: ``left`` and ``width`` in whole percent (at least 1 wide); an
    open end runs to the axis's end."""
    begin = start or 0
    left = _pct(begin, span)
    right = _pct(end if end is not None else span, span)
    return {
        "left": min(left, 99),
        "width": max(1, right - left),
        "from": span_words(begin),
        "to": span_words(end) if end is not None else "",
        "open": end is None,
    }


def drawn(report: dict[str, Any]) -> dict[str, Any]:
    """The report with its phases and steps placed on one axis, and the axis's ticks."""
    timeline = report.get("timeline") or {}
    phases = timeline.get("phases") or []
    steps = timeline.get("steps") or []
    instants: list[float] = [0.0]
    for phase in phases:
        instants += [phase.get("entered_seconds") or 0, phase.get("left_seconds") or 0]
    for step in steps:
        instants += [step.get("started_seconds") or 0, step.get("finished_seconds") or 0]
    instants += [s.get("stalled_seconds") or 0 for s in report.get("stalls") or []]
    instants += [r.get("at_seconds") or 0 for r in report.get("refusals") or []]
    instants.append(report.get("outcome", {}).get("ended_seconds") or 0)
    span = max(max(instants), 1.0)
    by_phase: dict[str, list[dict[str, Any]]] = {}
    for step in steps:
        by_phase.setdefault(step.get("phase") or "", []).append(
            {
                **step,
                "bar": _bar(step.get("started_seconds"), step.get("finished_seconds"), span),
            }
        )
    placed = [
        {
            **phase,
            "bar": _bar(phase.get("entered_seconds"), phase.get("left_seconds"), span),
            "steps": by_phase.get(phase.get("key") or "", []),
        }
        for phase in phases
    ]
    marks = [
        {**stall, "at": _pct(stall.get("stalled_seconds") or 0, span)}
        for stall in report.get("stalls") or []
    ]
    return {
        **report,
        "span": span,
        "span_words": span_words(span),
        "ticks": ticks(span),
        "placed": placed,
        "stall_marks": marks,
    }
