"""The boot-time self-check of leases: a target that does not take is never offered.

A leased value that applies cleanly and changes nothing (a value the game reads only at
start, a latched setting) would be borrowed by a run, recorded, restored, and would never
have done anything. A lease that declares ``self_check`` names the targets it offers, each
with a value to probe it with; when the host starts, after every plugin's startup and before
the engine's first tick, each target is read, the probe applied, read back, and the value it
read restored. A target whose probe does not read back, whose restore does not, or whose
calls fail or hang, is dropped: a WARNING names it, the plugin listing (``pageant plugins``
and ``GET /api/v1/admin/plugins``) shows it under ``dropped`` with the reason, the catalog
lists it under the lease's ``dropped``, and ``core.lease`` refuses it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Collection, Iterable
from datetime import datetime, timedelta
from typing import Any

from pageant.hookspecs import Lease
from pageant.plugins.loader import PluginRecord
from pageant.plugins.registry import Registry

log = logging.getLogger("pageant.plugins")

#: The bound on each call of a self-check: a game that does not answer drops the target.
CALL_SECONDS = 10.0
#: The ``until`` a probe is applied with: the game may put it back by itself after that.
PROBE_MINUTES = 1


def _show(value: Any) -> str:
    return repr(value)


async def _bounded(call: Any) -> Any:
    async with asyncio.timeout(CALL_SECONDS):
        return await call


async def probe(lease: Lease, target: str, value: str, now: datetime) -> str | None:
    """Set, read back and restore ``target``; None when the probe took and the value read
    first is back, else why not (a sentence naming what was seen)."""
    step = "read"
    # A probe is a borrowing of its own: a fresh key for its apply and its restore.
    key = f"self-check-{secrets.token_hex(8)}"
    try:
        baseline = await _bounded(lease.read(target))
        step = "apply"
        until = now + timedelta(minutes=PROBE_MINUTES)
        await _bounded(lease.apply_keyed(target, value, until, key))
        step = "read after apply"
        applied = await _bounded(lease.read(target))
        step = "restore"
        await _bounded(lease.restore_keyed(target, baseline, key))
        step = "read after restore"
        restored = await _bounded(lease.read(target))
    except TimeoutError:
        return f"{step} did not answer within {CALL_SECONDS:g} s"
    except Exception as exc:  # the plugin's or its game's failure: the target is not offered
        return f"{step} raised {type(exc).__name__}: {exc}"
    if applied != value:
        return (
            f"applied {_show(value)} but read back {_show(applied)}: the value does not take "
            "while the game runs (read only at start, or latched)"
        )
    if restored != baseline:
        return f"restored {_show(baseline)} but read back {_show(restored)}"
    return None


async def check_leases(
    registry: Registry,
    records: Iterable[PluginRecord],
    now: datetime,
    held: Collection[tuple[str, str]] = (),
) -> dict[tuple[str, str], str]:
    """Probe every target of every lease that declares ``self_check``; record what is
    dropped on the registry and on the owning plugin's record, log each as a WARNING, and
    answer ``{(lease id, target): reason}``.

    ``held`` are the ``(lease id, target)`` a run holds now (a host restarted mid-event):
    they are not probed, since a probe would change, for an instant, a value players are
    living under, and the lease itself has shown the target takes."""
    by_label = {record.label: record for record in records}
    dropped: dict[tuple[str, str], str] = {}
    for lease_id in sorted(registry.leases):
        lease = registry.leases[lease_id]
        if not lease.self_check:
            continue
        owner = registry.owner_of("leases", lease_id)
        for target, value in lease.self_check.items():
            if (lease_id, target) in held:
                log.info("lease %s target %r not probed: a run holds it", lease_id, target)
                continue
            why = await probe(lease, target, value, now)
            if why is None:
                continue
            dropped[(lease_id, target)] = why
            log.warning(
                "lease %s target %r dropped from the catalog (plugin %s): %s",
                lease_id,
                target,
                owner,
                why,
            )
            record = by_label.get(owner or "")
            if record is not None:
                record.dropped.append({"lease": lease_id, "target": target, "reason": why})
    registry.dropped_targets.update(dropped)
    return dropped
