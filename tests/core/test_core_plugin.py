"""The built-in core plugin where no host lends it services (``ctx.services`` is None)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import pytest

from pageant.builtin_plugins import core
from pageant.hookspecs import ActionContext, SendContext, classify


def action_context(**params: object) -> ActionContext:
    return ActionContext(
        params=params, idempotency_key="k", run=None, verify=False, deadline=datetime.now(UTC)
    )


@pytest.mark.parametrize("perform", [core.announce, core.cue])
async def test_an_action_without_host_services_fails_for_good(
    perform: Callable[[ActionContext], Awaitable[object]],
) -> None:
    envelope = classify(await perform(action_context(leg="core.log", message="hello")))
    assert (envelope.ok, envelope.retry) == (False, False)
    assert envelope.error == "no host services in this context"


@pytest.mark.parametrize("send", [core.send_to_log, core.send_to_webhook])
async def test_a_leg_without_host_services_fails_for_good(
    send: Callable[[str, SendContext], Awaitable[object]],
) -> None:
    ctx = SendContext(run=None, step_id=None, idempotency_key="k", deadline=datetime.now(UTC))
    envelope = classify(await send("hello", ctx))
    assert (envelope.ok, envelope.retry) == (False, False)
    assert envelope.error == "no host services in this context"
