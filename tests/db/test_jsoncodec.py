"""pageant.support.jsoncodec answers as the standard library does at every edge where orjson would
not, and the API and the database go through it."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from pageant.api.routing import dumps
from pageant.db.tables import event_run_log
from pageant.runs.create import start_now
from pageant.support import jsoncodec
from tests.factories import announce, phase, publish_event, spec

BIG = 2**70


def test_an_integer_past_64_bits_is_written_and_read_exactly():
    assert jsoncodec.dumps({"n": BIG}) == json.dumps({"n": BIG}, ensure_ascii=False)
    assert jsoncodec.loads(json.dumps([BIG, -BIG])) == [BIG, -BIG]
    assert jsoncodec.loads(json.dumps([BIG]).encode()) == [BIG]


def test_nan_and_infinity_are_read_as_the_standard_library_reads_them():
    found = jsoncodec.loads('{"a": NaN, "b": Infinity, "c": -Infinity}')
    assert math.isnan(found["a"]) and found["b"] == math.inf and found["c"] == -math.inf


def test_keys_that_are_not_text_are_written_as_text():
    assert json.loads(jsoncodec.dumps({1: "a", 2.5: "b"})) == {"1": "a", "2.5": "b"}


def test_what_json_cannot_hold_is_a_type_error_as_before():
    with pytest.raises(TypeError):
        jsoncodec.dumps({1, 2})

    def refuse(value: Any) -> Any:
        raise TypeError(f"not this: {type(value).__name__}")

    with pytest.raises(TypeError, match="not this: datetime"):
        jsoncodec.dumps({"at": datetime(2027, 1, 1, tzinfo=UTC)}, refuse)


def test_malformed_text_is_a_value_error():
    with pytest.raises(ValueError):
        jsoncodec.loads("{nope")


def test_the_api_writes_instants_in_utc_with_z_and_text_unescaped():
    from zoneinfo import ZoneInfo

    written = dumps(
        {
            "utc": datetime(2027, 3, 26, 19, 0, 0, 250_000, tzinfo=UTC),
            "berlin": datetime(2027, 3, 26, 20, 0, tzinfo=ZoneInfo("Europe/Berlin")),
            "name": "Drachenflug ☄",
        }
    )
    assert json.loads(written) == {
        "utc": "2027-03-26T19:00:00.250000Z",
        "berlin": "2027-03-26T19:00:00Z",
        "name": "Drachenflug ☄",
    }
    assert "☄" in written
    with pytest.raises(ValueError, match="naive datetime"):
        dumps({"at": datetime(2027, 1, 1)})


async def test_json_read_back_from_the_database_is_what_was_written(db, clock, host):
    # The column is written by the standard library and read through the codec.
    event = await publish_event(db, clock.now(), spec(phase("p", announce("hello"))))
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    detail = {"big": BIG, "nested": {"list": [1, 2.5, None, True]}, "text": "é"}
    async with db.begin() as conn:
        await conn.execute(
            event_run_log.insert().values(run_id=run_id, kind="note", detail=detail, at=clock.now())
        )
    async with db.connect() as conn:
        found = (
            await conn.execute(select(event_run_log.c.detail).where(event_run_log.c.kind == "note"))
        ).scalar_one()
    assert found == detail
