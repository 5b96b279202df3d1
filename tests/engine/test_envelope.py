"""The envelope: one function reads every answer, and anything unclear is a retryable failure.

The expensive mistake is recording a world change that did not happen, so an exception, a
timeout past the budget, an answer that is not a mapping and an answer without ``ok`` all
read as ``{ok: false, retry: true}``.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

import pytest

from pageant.hookspecs import Envelope, Resource, classify
from pageant.hookspecs.envelope import (
    MAX_ERROR_BYTES,
    MAX_HOLD_SECONDS,
    MAX_KIND_CHARS,
    MAX_REF_CHARS,
    MAX_RESOURCES,
)
from pageant.plugins.calls import run_with_envelope


def answering(value: Any):  # type: ignore[no-untyped-def]  # returns plugin callables of any shape
    async def fn(*args: Any) -> Any:
        return value

    return fn


# ── failures the plugin did not say it had ────────────────────────────────────


async def test_an_exception_is_a_retryable_failure() -> None:
    async def boom(ctx: Any) -> Any:
        raise RuntimeError("shard unreachable")

    answer = await run_with_envelope(boom, None, timeout=1)
    assert (answer.ok, answer.retry, answer.malformed) == (False, True, "exception")
    assert answer.error == "RuntimeError: shard unreachable"


async def test_an_answer_past_the_budget_is_a_retryable_failure() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow(ctx: Any) -> Any:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {"ok": True}

    answer = await run_with_envelope(slow, None, timeout=0.02)
    assert (answer.ok, answer.retry, answer.malformed) == (False, True, "timeout")
    assert answer.error == "no answer within 0.02 s"
    # The late call is stopped, not left running beside a retry.
    assert started.is_set() and cancelled.is_set()


async def test_an_answer_just_inside_the_budget_counts() -> None:
    async def quick(ctx: Any) -> Any:
        await asyncio.sleep(0)
        return {"ok": True}

    assert (await run_with_envelope(quick, None, timeout=5)).ok


async def test_a_sync_callable_that_slipped_through_is_a_retryable_failure() -> None:
    def not_async(ctx: Any) -> Any:
        return {"ok": True}

    answer = await run_with_envelope(not_async, None, timeout=1)  # type: ignore[arg-type]  # a sync function is the point
    assert (answer.ok, answer.retry, answer.malformed) == (False, True, "exception")


async def test_cancelling_the_caller_is_passed_on() -> None:
    async def forever(ctx: Any) -> Any:
        await asyncio.sleep(3600)

    task = asyncio.ensure_future(run_with_envelope(forever, None, timeout=60))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (None, "not a mapping"),
        ("ok", "not a mapping"),
        (True, "not a mapping"),
        ([{"ok": True}], "not a mapping"),
        (("ok", True), "not a mapping"),
        ({}, "missing ok"),
        ({"retry": False, "error": "x"}, "missing ok"),
        ({"ok": "true"}, "bad ok"),
        ({"ok": 1}, "bad ok"),
        ({"ok": None}, "bad ok"),
    ],
)
async def test_an_answer_that_does_not_say_ok_is_a_retryable_failure(raw: Any, why: str) -> None:
    for answer in (classify(raw), await run_with_envelope(answering(raw), timeout=1)):
        assert (answer.ok, answer.retry, answer.malformed) == (False, True, why)
        assert answer.error


# ── ok ────────────────────────────────────────────────────────────────────────


def test_plain_ok() -> None:
    assert classify({"ok": True}) == Envelope(ok=True)


def test_ok_reads_any_mapping() -> None:
    assert classify(OrderedDict(ok=True, hold_for=2)).hold_for == 2.0


def test_ok_with_resources_keeps_each_kind_ref_and_detail() -> None:
    answer = classify(
        {
            "ok": True,
            "resources": [
                {"kind": "npc", "ref": "0x1f", "region": "Yew"},
                {"kind": "gate", "ref": 42},
            ],
        }
    )
    assert answer.ok and not answer.malformed
    assert answer.resources == (
        Resource(kind="npc", ref="0x1f", detail={"region": "Yew"}),
        Resource(kind="gate", ref="42", detail={}),
    )


def test_ok_with_hold_for() -> None:
    assert classify({"ok": True, "hold_for": 30}).hold_for == 30.0
    assert classify({"ok": True, "hold_for": 0.5}).hold_for == 0.5
    assert classify({"ok": True, "hold_for": 0}).hold_for == 0.0
    assert classify({"ok": True, "hold_for": None}).hold_for == 0.0


def test_hold_for_past_a_day_is_refused_not_cut() -> None:
    assert classify({"ok": True, "hold_for": MAX_HOLD_SECONDS}).hold_for == MAX_HOLD_SECONDS
    for hold in (MAX_HOLD_SECONDS + 1, float("inf")):
        answer = classify({"ok": True, "hold_for": hold})
        assert (answer.ok, answer.retry, answer.malformed) == (False, True, "bad hold_for")
        assert "86,400" in (answer.error or "")


def test_ok_with_park() -> None:
    assert classify({"ok": True, "park": True}).park is True
    assert classify({"ok": True, "park": False}).park is False
    assert classify({"ok": True}).park is False


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ({"ok": True, "hold_for": -1}, "bad hold_for"),
        ({"ok": True, "hold_for": "30"}, "bad hold_for"),
        ({"ok": True, "hold_for": True}, "bad hold_for"),
        ({"ok": True, "hold_for": float("nan")}, "bad hold_for"),
        ({"ok": True, "park": "yes"}, "bad park"),
        ({"ok": True, "park": 1}, "bad park"),
    ],
)
def test_a_malformed_hold_or_park_is_a_retryable_failure(raw: Any, why: str) -> None:
    answer = classify(raw)
    assert (answer.ok, answer.retry, answer.malformed) == (False, True, why)


# ── ok: false ─────────────────────────────────────────────────────────────────


def test_a_failure_that_may_be_retried() -> None:
    answer = classify({"ok": False, "retry": True, "error": "shard busy"})
    assert (answer.ok, answer.retry, answer.error, answer.malformed) == (
        False,
        True,
        "shard busy",
        None,
    )


def test_a_failure_for_good() -> None:
    answer = classify({"ok": False, "retry": False, "error": "no such region"})
    assert (answer.ok, answer.retry, answer.error) == (False, False, "no such region")


def test_a_failure_without_retry_or_error_is_retryable_and_says_so() -> None:
    answer = classify({"ok": False})
    assert (answer.ok, answer.retry) == (False, True)
    assert answer.error == "failed without an error message"


def test_a_failure_with_a_retry_that_is_not_a_bool_is_retryable() -> None:
    assert classify({"ok": False, "retry": "no", "error": "x"}).retry is True


def test_a_failure_ignores_resources_it_reports() -> None:
    # A failed call changed nothing the host will record.
    answer = classify({"ok": False, "retry": False, "resources": [{"kind": "npc", "ref": "1"}]})
    assert answer.resources == ()


# ── malformed resources ───────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("resources", "error"),
    [
        ("npc:0x1f", '"resources" must be a list'),
        ({"kind": "npc", "ref": "1"}, '"resources" must be a list'),
        (["npc"], "resources[0] needs a kind and a ref"),
        ([{"kind": "npc"}], "resources[0] needs a kind and a ref"),
        ([{"ref": "1"}], "resources[0] needs a kind and a ref"),
        ([{"kind": "npc", "ref": "1"}, {"kind": "", "ref": "2"}], "resources[1] needs a kind"),
    ],
)
def test_malformed_resources_are_a_retryable_failure(resources: Any, error: str) -> None:
    answer = classify({"ok": True, "resources": resources})
    assert (answer.ok, answer.retry, answer.malformed) == (False, True, "bad resources")
    assert error in (answer.error or "")
    assert answer.resources == ()


def test_classify_never_raises() -> None:
    for raw in (object(), 3.5, b"ok", {"ok": True, "resources": None}, {"ok": True, 1: 2}):
        assert isinstance(classify(raw), Envelope)


def test_a_resource_ref_of_zero_is_a_ref() -> None:
    answer = classify({"ok": True, "resources": [{"kind": "slot", "ref": 0}]})
    assert answer.ok
    assert answer.resources == (Resource(kind="slot", ref="0", detail={}),)


# ── answers the host could not store are refused, naming the field and its limit ──


def test_an_error_at_the_limit_is_kept_and_one_past_it_is_refused() -> None:
    kept = classify({"ok": False, "retry": False, "error": "e" * MAX_ERROR_BYTES})
    assert kept.error == "e" * MAX_ERROR_BYTES and kept.malformed is None
    refused = classify({"ok": False, "retry": False, "error": "é" * (MAX_ERROR_BYTES // 2 + 1)})
    assert (refused.ok, refused.retry, refused.malformed) == (False, False, "bad error")
    assert refused.error is not None and len(refused.error) < 400
    assert f'"error" is {MAX_ERROR_BYTES + 2:,} bytes; the most is 16,384' in refused.error


def test_as_many_resources_as_the_limit_are_read_and_one_more_is_refused() -> None:
    many = [{"kind": "coin", "ref": str(i)} for i in range(MAX_RESOURCES)]
    assert len(classify({"ok": True, "resources": many}).resources) == MAX_RESOURCES
    answer = classify({"ok": True, "resources": [*many, {"kind": "coin", "ref": "x"}]})
    assert (answer.ok, answer.retry, answer.malformed) == (False, True, "bad resources")
    assert "1,001; the most one answer may report is 1,000" in (answer.error or "")


@pytest.mark.parametrize(
    ("resource", "error"),
    [
        ({"kind": 7, "ref": "a"}, "resources[0].kind must be text of at most 120 characters"),
        ({"kind": ["npc"], "ref": "a"}, "resources[0].kind must be text"),
        ({"kind": "k" * (MAX_KIND_CHARS + 1), "ref": "a"}, "at most 120 characters"),
        (
            {"kind": "npc", "ref": "r" * (MAX_REF_CHARS + 1)},
            "ref is 201 characters; the most is 200",
        ),
        ({"kind": "npc", "ref": 1.5}, "resources[0].ref must be text or a whole number"),
        ({"kind": "npc", "ref": "a", "at": object()}, "resources[0] detail is not JSON"),
        ({"kind": "npc", "ref": "a", "hp": float("nan")}, "resources[0] detail is not JSON"),
    ],
)
def test_a_resource_the_ledger_could_not_store_is_refused(resource: Any, error: str) -> None:
    answer = classify({"ok": True, "resources": [resource]})
    assert (answer.ok, answer.retry, answer.malformed) == (False, True, "bad resources")
    assert error in (answer.error or "")


def test_a_resource_at_every_limit_is_read() -> None:
    resource = {"kind": "k" * MAX_KIND_CHARS, "ref": "r" * MAX_REF_CHARS, "hp": 3}
    (read,) = classify({"ok": True, "resources": [resource]}).resources
    assert (len(read.kind), len(read.ref), read.detail) == (
        MAX_KIND_CHARS,
        MAX_REF_CHARS,
        {"hp": 3},
    )


async def test_an_enormous_exception_message_is_cut_and_says_so() -> None:
    async def boom(ctx: Any) -> Any:
        raise RuntimeError("x" * 100_000)

    answer = await run_with_envelope(boom, None, timeout=1)
    assert answer.error is not None and len(answer.error) < 4_100
    assert answer.error.endswith("(96,000 more characters)")
