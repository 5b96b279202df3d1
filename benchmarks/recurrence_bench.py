"""Time pageant.schedules.recurrence on the windows the engine and the calendar ask for.

Run as a script: ``python benchmarks/recurrence_bench.py``. Not a test — timings depend on the
machine — but the figures say whether expansion stays cheap: the engine expands a 14-day
horizon per definition, the calendar projects about a year ahead.
"""

from __future__ import annotations

import timeit
from datetime import UTC, datetime, timedelta

from pageant.schedules.recurrence import next_occurrence, occurrences

START = datetime(2027, 3, 1, tzinfo=UTC)

CASES = [
    (
        "weekly fri 20:00, 14 days, Europe/Berlin",
        lambda: occurrences(
            {"kind": "weekly", "days": ["friday"], "time": "20:00"},
            "Europe/Berlin",
            START,
            START + timedelta(days=14),
        ),
    ),
    (
        "weekly sun 02:30, 14 days over the spring gap",
        lambda: occurrences(
            {"kind": "weekly", "days": ["sunday"], "time": "02:30"},
            "Europe/Berlin",
            datetime(2027, 3, 20, tzinfo=UTC),
            datetime(2027, 4, 3, tzinfo=UTC),
        ),
    ),
    (
        "weekly every day 20:00, 14 days",
        lambda: occurrences(
            {
                "kind": "weekly",
                "days": [
                    "monday",
                    "tuesday",
                    "wednesday",
                    "thursday",
                    "friday",
                    "saturday",
                    "sunday",
                ],
                "time": "20:00",
            },
            "Europe/Berlin",
            START,
            START + timedelta(days=14),
        ),
    ),
    (
        "monthly last fri 20:00, 400 days",
        lambda: occurrences(
            {"kind": "monthly", "nth": -1, "weekday": "friday", "time": "20:00"},
            "Europe/Berlin",
            START,
            START + timedelta(days=400),
        ),
    ),
    (
        "weekly fri 20:00, 400 days",
        lambda: occurrences(
            {"kind": "weekly", "days": ["friday"], "time": "20:00"},
            "Europe/Berlin",
            START,
            START + timedelta(days=400),
        ),
    ),
    (
        "next_occurrence weekly fri 20:00",
        lambda: next_occurrence(
            {"kind": "weekly", "days": ["friday"], "time": "20:00"}, "Europe/Berlin", START
        ),
    ),
]


def main() -> None:
    """Print the mean and best time per call for each case."""
    for label, call in CASES:
        timer = timeit.Timer(call)
        number, _ = timer.autorange()
        runs = timer.repeat(repeat=5, number=number)
        best = min(runs) / number * 1e6
        mean = sum(runs) / (5 * number) * 1e6
        result = call()
        found = len(result) if isinstance(result, list) else int(result is not None)
        print(f"{label:<48} {found:>4} occ  best {best:9.1f} µs  mean {mean:9.1f} µs")


if __name__ == "__main__":
    main()
