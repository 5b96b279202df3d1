"""Recurrence: each authored slot becomes exactly one UTC instant, DST included.

The fixtures are real transitions: Europe/Berlin in 2027 (spring gap 28 March, autumn fold
31 October), Australia/Sydney (southern hemisphere: the fold on the first Sunday of April, the
gap on the first Sunday of October), Australia/Lord_Howe (a 30-minute shift) and Asia/Tokyo (no
DST at all). Every expectation is an exact UTC instant.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime, timedelta, timezone
from itertools import pairwise

import pytest

from pageant.schedules.recurrence import (
    WEEKDAYS,
    Occurrence,
    is_zone,
    local_slot,
    next_occurrence,
    occurrences,
    resolve_slot,
    zone,
)

BERLIN = "Europe/Berlin"
SYDNEY = "Australia/Sydney"
LORD_HOWE = "Australia/Lord_Howe"
TOKYO = "Asia/Tokyo"

GAP_30 = {"kind": "gap", "shift_minutes": 30}
FOLD = {"kind": "fold", "shift_minutes": 0}


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def weekly(*days: str, at: str) -> dict:
    return {"kind": "weekly", "days": list(days), "time": at}


def monthly(nth: int, weekday: str, at: str) -> dict:
    return {"kind": "monthly", "nth": nth, "weekday": weekday, "time": at}


def once(at: str) -> dict:
    return {"kind": "once", "at": at}


def summary(found: list[Occurrence]) -> list[tuple[datetime, str, dict | None]]:
    return [(o.at, o.slot, o.dst_adjusted) for o in found]


# ── Europe/Berlin: the Friday 20:00 event across both transitions ─────────────────────────


def test_friday_evening_berlin_moves_an_hour_earlier_in_utc_after_the_spring_change():
    found = occurrences(weekly("friday", at="20:00"), BERLIN, utc(2027, 3, 15), utc(2027, 4, 5))
    assert summary(found) == [
        (utc(2027, 3, 19, 19), "2027-03-19T20:00", None),
        (utc(2027, 3, 26, 19), "2027-03-26T20:00", None),  # two days before the change
        (utc(2027, 4, 2, 18), "2027-04-02T20:00", None),
    ]
    assert [o.local.hour for o in found] == [20, 20, 20]
    assert [o.local.utcoffset() for o in found] == [
        timedelta(hours=1),
        timedelta(hours=1),
        timedelta(hours=2),
    ]


def test_friday_evening_berlin_moves_an_hour_later_in_utc_after_the_autumn_change():
    found = occurrences(weekly("friday", at="20:00"), BERLIN, utc(2027, 10, 18), utc(2027, 11, 8))
    assert summary(found) == [
        (utc(2027, 10, 22, 18), "2027-10-22T20:00", None),
        (utc(2027, 10, 29, 18), "2027-10-29T20:00", None),
        (utc(2027, 11, 5, 19), "2027-11-05T20:00", None),
    ]


# ── Europe/Berlin: a slot inside the gap and inside the fold ─────────────────────────────


def test_a_slot_in_the_spring_gap_runs_at_the_first_time_that_exists():
    found = occurrences(weekly("sunday", at="02:30"), BERLIN, utc(2027, 3, 14), utc(2027, 4, 10))
    assert summary(found) == [
        (utc(2027, 3, 14, 1, 30), "2027-03-14T02:30", None),
        (utc(2027, 3, 21, 1, 30), "2027-03-21T02:30", None),
        (utc(2027, 3, 28, 1, 0), "2027-03-28T02:30", GAP_30),
        (utc(2027, 4, 4, 0, 30), "2027-04-04T02:30", None),
    ]
    shifted = found[2]
    # It keeps its authored slot as its identity but says when it really runs: 03:00 CEST.
    assert (shifted.local.hour, shifted.local.minute) == (3, 0)
    assert shifted.local.utcoffset() == timedelta(hours=2)
    assert local_slot(shifted.at, BERLIN) == "2027-03-28T03:00"


def test_a_slot_in_the_autumn_fold_takes_the_first_of_its_two_instants():
    found = occurrences(weekly("sunday", at="02:30"), BERLIN, utc(2027, 10, 17), utc(2027, 11, 10))
    assert summary(found) == [
        (utc(2027, 10, 17, 0, 30), "2027-10-17T02:30", None),
        (utc(2027, 10, 24, 0, 30), "2027-10-24T02:30", None),
        (utc(2027, 10, 31, 0, 30), "2027-10-31T02:30", FOLD),
        (utc(2027, 11, 7, 1, 30), "2027-11-07T02:30", None),
    ]
    assert found[2].local.utcoffset() == timedelta(hours=2)  # CEST: the first 02:30


def test_the_second_0230_of_the_fold_is_not_an_occurrence():
    schedule = weekly("sunday", at="02:30")
    # 01:30Z on 31 October is the repeated 02:30 CET; only 00:30Z may run.
    assert occurrences(schedule, BERLIN, utc(2027, 10, 31, 0, 31), utc(2027, 10, 31, 2)) == []
    assert len(occurrences(schedule, BERLIN, utc(2027, 10, 31, 0, 30), utc(2027, 10, 31, 2))) == 1


def test_the_hours_beside_the_gap_and_fold_are_not_adjusted():
    # 01:59 exists before the spring gap, 03:00 is its first minute after; 01:59 and 03:00
    # on the autumn day exist only once.
    assert resolve_slot("2027-03-28T01:59", BERLIN).dst_adjusted is None
    assert resolve_slot("2027-03-28T03:00", BERLIN).at == utc(2027, 3, 28, 1)
    assert resolve_slot("2027-03-28T03:00", BERLIN).dst_adjusted is None
    assert resolve_slot("2027-03-28T02:00", BERLIN).dst_adjusted == {
        "kind": "gap",
        "shift_minutes": 60,
    }
    assert resolve_slot("2027-03-28T02:59", BERLIN).dst_adjusted == {
        "kind": "gap",
        "shift_minutes": 1,
    }
    assert resolve_slot("2027-10-31T01:59", BERLIN).dst_adjusted is None
    assert resolve_slot("2027-10-31T02:00", BERLIN).dst_adjusted == FOLD
    assert resolve_slot("2027-10-31T03:00", BERLIN).dst_adjusted is None


# ── Asia/Tokyo: no DST ─────────────────────────────────────────────────────────────────────


def test_tokyo_has_no_transitions_so_nothing_is_ever_adjusted():
    found = occurrences(weekly(*WEEKDAYS, at="02:30"), TOKYO, utc(2027, 1, 1), utc(2028, 1, 1))
    assert len(found) == 365
    assert all(o.dst_adjusted is None for o in found)
    assert all(o.local.utcoffset() == timedelta(hours=9) for o in found)
    assert found[0].at == utc(2027, 1, 1, 17, 30)  # 02:30 JST on 2 January
    assert found[0].slot == "2027-01-02T02:30"


# ── Australia: the southern hemisphere, and a 30-minute shift ─────────────────────────────


def test_sydney_folds_on_the_first_sunday_of_april():
    found = occurrences(weekly("sunday", at="02:30"), SYDNEY, utc(2027, 3, 25), utc(2027, 4, 12))
    assert summary(found) == [
        (utc(2027, 3, 27, 15, 30), "2027-03-28T02:30", None),  # AEDT, +11
        (utc(2027, 4, 3, 15, 30), "2027-04-04T02:30", FOLD),  # the first 02:30, still +11
        (utc(2027, 4, 10, 16, 30), "2027-04-11T02:30", None),  # AEST, +10
    ]


def test_sydney_skips_forward_on_the_first_sunday_of_october():
    found = occurrences(weekly("sunday", at="02:30"), SYDNEY, utc(2027, 9, 24), utc(2027, 10, 11))
    assert summary(found) == [
        (utc(2027, 9, 25, 16, 30), "2027-09-26T02:30", None),
        (utc(2027, 10, 2, 16, 0), "2027-10-03T02:30", GAP_30),  # 03:00 AEDT
        (utc(2027, 10, 9, 15, 30), "2027-10-10T02:30", None),
    ]


def test_lord_howe_half_hour_gap_moves_0215_to_0230():
    found = occurrences(
        weekly("sunday", at="02:15"), LORD_HOWE, utc(2027, 9, 24), utc(2027, 10, 11)
    )
    assert summary(found) == [
        (utc(2027, 9, 25, 15, 45), "2027-09-26T02:15", None),  # +10:30
        (utc(2027, 10, 2, 15, 30), "2027-10-03T02:15", {"kind": "gap", "shift_minutes": 15}),
        (utc(2027, 10, 9, 15, 15), "2027-10-10T02:15", None),  # +11
    ]
    assert (found[1].local.hour, found[1].local.minute) == (2, 30)


def test_lord_howe_half_hour_fold_takes_the_first_0145():
    found = occurrences(weekly("sunday", at="01:45"), LORD_HOWE, utc(2027, 3, 25), utc(2027, 4, 12))
    assert summary(found) == [
        (utc(2027, 3, 27, 14, 45), "2027-03-28T01:45", None),  # +11
        (utc(2027, 4, 3, 14, 45), "2027-04-04T01:45", FOLD),  # the first, still +11
        (utc(2027, 4, 10, 15, 15), "2027-04-11T01:45", None),  # +10:30
    ]


def test_a_skipped_calendar_day_still_yields_its_occurrence():
    # Samoa moved across the date line in 2011: 30 December never happened in Pacific/Apia.
    found = occurrences(
        weekly("friday", at="20:00"), "Pacific/Apia", utc(2011, 12, 20), utc(2012, 1, 2)
    )
    assert [o.slot for o in found] == ["2011-12-23T20:00", "2011-12-30T20:00"]
    skipped = found[1]
    assert skipped.dst_adjusted == {"kind": "gap", "shift_minutes": 240}
    assert skipped.local.replace(tzinfo=None) == datetime(2011, 12, 31, 0, 0)


def test_a_window_opening_after_the_skipped_day_still_finds_its_slot():
    # The 30 December slot runs at 10:00Z, which is already 31 December on the wall: a window
    # that opens then must look back past its own local date to find it.
    schedule = weekly("friday", at="20:00")
    found = occurrences(schedule, "Pacific/Apia", utc(2011, 12, 30, 10), utc(2011, 12, 31))
    assert [o.slot for o in found] == ["2011-12-30T20:00"]
    found = next_occurrence(schedule, "Pacific/Apia", utc(2011, 12, 30, 10))
    assert found is not None and found.slot == "2011-12-30T20:00"


# ── Monthly ───────────────────────────────────────────────────────────────────────────────


def test_last_friday_is_the_fifth_in_a_five_friday_month_and_the_fourth_otherwise():
    found = occurrences(monthly(-1, "friday", "20:00"), BERLIN, utc(2027, 1, 1), utc(2027, 5, 1))
    assert summary(found) == [
        (utc(2027, 1, 29, 19), "2027-01-29T20:00", None),  # January 2027 has five Fridays
        (utc(2027, 2, 26, 19), "2027-02-26T20:00", None),  # February has four
        (utc(2027, 3, 26, 19), "2027-03-26T20:00", None),
        (utc(2027, 4, 30, 18), "2027-04-30T20:00", None),  # summer time
    ]


@pytest.mark.parametrize(
    ("nth", "january", "february"),
    [(1, 1, 5), (2, 8, 12), (3, 15, 19), (4, 22, 26), (-1, 29, 26)],
)
def test_nth_friday_of_the_month(nth, january, february):
    found = occurrences(monthly(nth, "friday", "20:00"), TOKYO, utc(2027, 1, 1), utc(2027, 3, 1))
    assert [o.slot for o in found] == [
        f"2027-01-{january:02d}T20:00",
        f"2027-02-{february:02d}T20:00",
    ]
    assert [o.at for o in found] == [utc(2027, 1, january, 11), utc(2027, 2, february, 11)]


def test_monthly_last_sunday_hits_the_berlin_gap_and_fold():
    found = occurrences(monthly(-1, "sunday", "02:30"), BERLIN, utc(2027, 1, 1), utc(2028, 1, 1))
    assert len(found) == 12
    adjusted = [(o.slot, o.at, o.dst_adjusted) for o in found if o.dst_adjusted]
    assert adjusted == [
        ("2027-03-28T02:30", utc(2027, 3, 28, 1, 0), GAP_30),
        ("2027-10-31T02:30", utc(2027, 10, 31, 0, 30), FOLD),
    ]


# ── Once and manual ───────────────────────────────────────────────────────────────────────


def test_once_before_the_window_yields_nothing():
    schedule = once("2027-03-01T20:00")
    assert occurrences(schedule, BERLIN, utc(2027, 3, 2), utc(2027, 4, 1)) == []
    assert next_occurrence(schedule, BERLIN, utc(2027, 3, 2)) is None


def test_once_inside_the_window_yields_one():
    schedule = once("2027-03-28T02:30")
    found = occurrences(schedule, BERLIN, utc(2027, 3, 1), utc(2027, 4, 1))
    assert summary(found) == [(utc(2027, 3, 28, 1), "2027-03-28T02:30", GAP_30)]


def test_once_far_ahead_is_still_the_next_occurrence():
    found = next_occurrence(once("2031-06-01T12:00"), BERLIN, utc(2027, 3, 1))
    assert found is not None and found.at == utc(2031, 6, 1, 10)


def test_manual_has_no_occurrences():
    assert occurrences({"kind": "manual"}, BERLIN, utc(2027, 1, 1), utc(2028, 1, 1)) == []
    assert next_occurrence({"kind": "manual"}, BERLIN, utc(2027, 1, 1)) is None


# ── Windows are half-open, and overlapping windows agree ─────────────────────────────────


def test_window_includes_an_occurrence_at_its_start():
    found = occurrences(
        weekly("friday", at="20:00"), BERLIN, utc(2027, 3, 26, 19), utc(2027, 3, 27)
    )
    assert [o.at for o in found] == [utc(2027, 3, 26, 19)]


def test_window_excludes_an_occurrence_at_its_end():
    schedule = weekly("friday", at="20:00")
    assert occurrences(schedule, BERLIN, utc(2027, 3, 26), utc(2027, 3, 26, 19)) == []
    found = occurrences(schedule, BERLIN, utc(2027, 3, 26), utc(2027, 3, 26, 19, 0, 0, 1))
    assert [o.at for o in found] == [utc(2027, 3, 26, 19)]


def test_an_empty_or_backwards_window_yields_nothing():
    schedule = weekly(*WEEKDAYS, at="12:00")
    assert occurrences(schedule, BERLIN, utc(2027, 3, 1), utc(2027, 3, 1)) == []
    assert occurrences(schedule, BERLIN, utc(2027, 3, 2), utc(2027, 3, 1)) == []


def test_bounds_in_any_offset_mean_the_same_instants():
    schedule = weekly("sunday", at="02:30")
    plus_five = timezone(timedelta(hours=5))
    in_utc = occurrences(schedule, BERLIN, utc(2027, 3, 1), utc(2027, 4, 1))
    in_offset = occurrences(
        schedule,
        BERLIN,
        utc(2027, 3, 1).astimezone(plus_five),
        utc(2027, 4, 1).astimezone(plus_five),
    )
    assert in_offset == in_utc
    assert all(o.at.tzinfo is UTC for o in in_offset)


# Cut points chosen to fall on occurrences, inside the gap and the fold, and between them.
CUTS = [
    utc(2027, 3, 27, 23),
    utc(2027, 3, 28, 0, 30),
    utc(2027, 3, 28, 1, 0),
    utc(2027, 3, 28, 1, 0, 0, 1),
    utc(2027, 3, 28, 1, 30),
    utc(2027, 6, 1),
    utc(2027, 10, 30, 23, 59),
    utc(2027, 10, 31, 0, 30),
    utc(2027, 10, 31, 1, 0),
    utc(2027, 10, 31, 1, 30),
    utc(2027, 10, 31, 1, 30, 0, 1),
    utc(2027, 11, 2),
]


@pytest.mark.parametrize(
    ("tz", "at"),
    [(BERLIN, "02:30"), (BERLIN, "20:00"), (SYDNEY, "02:30"), (LORD_HOWE, "01:45")],
)
def test_windows_cut_anywhere_add_up_to_the_whole(tz, at):
    schedule = weekly(*WEEKDAYS, at=at)
    start, end = utc(2027, 3, 1), utc(2027, 12, 1)
    whole = occurrences(schedule, tz, start, end)
    bounds = [start, *CUTS, end]
    pieces = [o for a, b in pairwise(bounds) for o in occurrences(schedule, tz, a, b)]
    assert pieces == whole


def test_overlapping_windows_give_identical_occurrences():
    schedule = weekly("sunday", at="02:30")
    # Two expansions that overlap across both transitions, as consecutive ticks' would.
    earlier = occurrences(schedule, BERLIN, utc(2027, 3, 1), utc(2027, 11, 3))
    later = occurrences(schedule, BERLIN, utc(2027, 3, 20), utc(2027, 12, 1))
    overlap_start, overlap_end = utc(2027, 3, 20), utc(2027, 11, 3)
    assert [o for o in earlier if o.at >= overlap_start] == [o for o in later if o.at < overlap_end]
    merged = {*earlier, *later}
    assert len(merged) == len({o.slot for o in merged}) == len({o.at for o in merged})


@pytest.mark.parametrize("tz", [BERLIN, SYDNEY, LORD_HOWE, "America/New_York"])
@pytest.mark.parametrize("at", ["01:45", "02:00", "02:15", "02:30", "20:00"])
def test_a_year_of_a_daily_schedule_has_every_date_once(tz, at):
    found = occurrences(weekly(*WEEKDAYS, at=at), tz, utc(2026, 12, 1), utc(2028, 2, 1))
    days = [date.fromisoformat(o.slot[:10]) for o in found]
    year = [d for d in days if d.year == 2027]
    assert year == [date(2027, 1, 1) + timedelta(days=n) for n in range(365)]
    assert all(a.at < b.at for a, b in pairwise(found))
    # 2027 starts on a Friday: 53 Fridays, 52 of every other weekday.
    per_weekday = Counter(WEEKDAYS[d.weekday()] for d in year)
    assert per_weekday == {name: 53 if name == "friday" else 52 for name in WEEKDAYS}


@pytest.mark.parametrize("day", WEEKDAYS)
def test_a_year_of_one_weekday_in_berlin_is_52_or_53_weekly_occurrences(day):
    found = occurrences(
        weekly(day, at="02:30"),
        BERLIN,
        datetime(2027, 1, 1, tzinfo=zone(BERLIN)),
        datetime(2028, 1, 1, tzinfo=zone(BERLIN)),
    )
    assert len(found) == (53 if day == "friday" else 52)
    steps = Counter(b.at - a.at for a, b in pairwise(found))
    week, hour, half = timedelta(days=7), timedelta(hours=1), timedelta(minutes=30)
    if day == "sunday":
        # Into and out of the gap Sunday (it runs at 03:00): 30 minutes short each time; out
        # of the fold Sunday (it took the first 02:30): an hour long.
        assert steps == {week: len(found) - 4, week - half: 2, week + hour: 1}
    else:
        # One week an hour short across the spring change, one an hour long in autumn.
        assert steps == {week: len(found) - 3, week - hour: 1, week + hour: 1}


# ── next_occurrence ───────────────────────────────────────────────────────────────────────


def test_next_occurrence_includes_an_occurrence_at_exactly_after():
    schedule = weekly("friday", at="20:00")
    found = next_occurrence(schedule, BERLIN, utc(2027, 3, 26, 19))
    assert found is not None and found.at == utc(2027, 3, 26, 19)
    found = next_occurrence(schedule, BERLIN, utc(2027, 3, 26, 19, 0, 0, 1))
    assert found is not None and found.at == utc(2027, 4, 2, 18)


def test_next_occurrence_finds_the_gap_shifted_sunday():
    schedule = weekly("sunday", at="02:30")
    found = next_occurrence(schedule, BERLIN, utc(2027, 3, 27))
    assert found is not None
    assert (found.at, found.dst_adjusted) == (utc(2027, 3, 28, 1), GAP_30)
    found = next_occurrence(schedule, BERLIN, utc(2027, 3, 28, 1, 0, 0, 1))
    assert found is not None and found.at == utc(2027, 4, 4, 0, 30)


def test_next_occurrence_of_a_monthly_crosses_to_the_next_month():
    found = next_occurrence(monthly(-1, "friday", "20:00"), BERLIN, utc(2027, 1, 29, 19, 0, 1))
    assert found is not None and found.at == utc(2027, 2, 26, 19)


@pytest.mark.parametrize(
    "schedule",
    [
        weekly("sunday", at="02:30"),
        weekly("monday", "thursday", at="23:45"),
        monthly(-1, "sunday", "02:30"),
        monthly(1, "monday", "00:15"),
    ],
)
@pytest.mark.parametrize("tz", [BERLIN, SYDNEY, LORD_HOWE, TOKYO])
def test_next_occurrence_is_the_first_of_the_window_that_starts_there(schedule, tz):
    # Every 13 hours through a year, so the probes land on every hour of every weekday.
    for step in range(0, 24 * 366, 13):
        after = utc(2027, 1, 1) + timedelta(hours=step)
        expected = occurrences(schedule, tz, after, after + timedelta(days=70))[0]
        assert next_occurrence(schedule, tz, after) == expected


# ── Zones and bad input ───────────────────────────────────────────────────────────────────


def test_an_unknown_zone_is_refused_by_name():
    with pytest.raises(ValueError, match='"Mars/Olympus" is not a known IANA time zone'):
        zone("Mars/Olympus")
    with pytest.raises(ValueError, match='"Mars/Olympus" is not a known IANA time zone'):
        occurrences(weekly("friday", at="20:00"), "Mars/Olympus", utc(2027, 1, 1), utc(2027, 2, 1))
    with pytest.raises(ValueError, match='"Mars/Olympus" is not a known IANA time zone'):
        next_occurrence(weekly("friday", at="20:00"), "Mars/Olympus", utc(2027, 1, 1))


@pytest.mark.parametrize(
    "name",
    [
        "",
        "/etc/localtime",
        "/usr/share/zoneinfo/Europe/Berlin",
        "../zoneinfo/Europe/Berlin",
        "Europe/../Europe/Berlin",
        "localtime",  # this machine's zone, not an IANA name
        "posixrules",
        "posix/Europe/Berlin",
        "right/Europe/Berlin",
        "europe/berlin",
        "Europe/Berlin/",
        "Mars/Olympus",
    ],
)
def test_names_that_are_not_iana_zones_are_refused(name):
    assert not is_zone(name)
    with pytest.raises(ValueError, match="is not a known IANA time zone"):
        zone(name)


@pytest.mark.parametrize("name", [BERLIN, SYDNEY, LORD_HOWE, TOKYO, "UTC", "America/New_York"])
def test_iana_zones_are_accepted(name):
    assert is_zone(name)
    assert zone(name).key == name


def test_naive_bounds_are_refused():
    schedule = weekly("friday", at="20:00")
    with pytest.raises(ValueError, match="start must be a timezone-aware datetime"):
        occurrences(schedule, BERLIN, datetime(2027, 1, 1), utc(2027, 2, 1))
    with pytest.raises(ValueError, match="end must be a timezone-aware datetime"):
        occurrences(schedule, BERLIN, utc(2027, 1, 1), datetime(2027, 2, 1))
    with pytest.raises(ValueError, match="after must be a timezone-aware datetime"):
        next_occurrence(schedule, BERLIN, datetime(2027, 1, 1))


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ({"kind": "cron", "expr": "0 20 * * 5"}, "schedule.kind: 'cron' is not one of"),
        (weekly("friyay", at="20:00"), "schedule.days: 'friyay' is not one of monday"),
        ({"kind": "weekly", "days": [], "time": "20:00"}, "schedule.days: expected a non-empty"),
        (weekly("friday", at="8pm"), 'schedule.time: expected a time "HH:MM"'),
        (monthly(5, "friday", "20:00"), r"schedule.nth: expected 1, 2, 3, 4 or -1 \(last\)"),
        (once("2027-13-01T20:00"), 'schedule.at: expected a local time "YYYY-MM-DDTHH:MM"'),
    ],
)
def test_a_malformed_schedule_is_refused_saying_where(schedule, message):
    with pytest.raises(ValueError, match=message):
        occurrences(schedule, BERLIN, utc(2027, 1, 1), utc(2028, 1, 1))


def test_resolve_slot_and_local_slot_agree_outside_transitions():
    found = resolve_slot("2027-06-04T20:00", BERLIN)
    assert found == Occurrence(
        utc(2027, 6, 4, 18), "2027-06-04T20:00", datetime(2027, 6, 4, 20, tzinfo=zone(BERLIN))
    )
    assert local_slot(found.at, BERLIN) == found.slot
