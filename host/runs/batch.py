"""Runs started in batches: many starts of one event, answered in order, made together.

A tool that starts hundreds of runs at once (one per server, per arena, per team) would
otherwise send hundreds of requests and pay a transaction for each. A batch is judged item
by item exactly as a single start is (:func:`pageant.runs.create.plan_start`: the event, its
published version, each param against its declaration and its option source, the
concurrency key), and every accepted item's run is made in **one** transaction — one write
of the engine's group commit, so their steps are one insert and their log lines another.

A refused item writes nothing and refuses nothing else: its own error stands in its place
in the answer. (An item of the wrong shape — a scope that is not text, an unknown field — is
the caller's mistake, not a start to judge: it refuses the whole batch at the door, as any
malformed body is.) Two items of one batch are two starts at the same instant, so they meet the
same rules two starts sent together meet: an identical item answers the same run, a second
item of a held concurrency key is refused naming the first's run, and an item that starts
a scope an earlier item already starts with other params is refused (one event's runs at
one instant are told apart by their scope).

The option sources are asked before the transaction and never inside it, each source once
for the whole batch (:class:`pageant.runs.options.Answers`). A version published between
that check and the transaction is not checked again: the items whose values it would check
are refused with a conflict (start them again), the others go ahead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pageant.db.shared import Batch
from pageant.errors import Conflict, Invalid, PageantError
from pageant.runs import params as run_params
from pageant.runs.create import create_planned, plan_start, start_facts
from pageant.runs.options import Answers, check_run_values, takes_option_values

if TYPE_CHECKING:
    from pageant.hosting import Host

#: The most starts one batch may hold.
MAX_BATCH = 500

__all__ = ["MAX_BATCH", "Start", "Started", "start_many"]


@dataclass(frozen=True)
class Start:
    """One item of a batch: what a single start's body says."""

    scope: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Started:
    """An item's run: its id, and whether this batch made it (False: an identical start at
    the same instant had)."""

    run_id: int
    created: bool


async def start_many(
    host: Host,
    definition_id: int,
    starts: Sequence[Start],
    *,
    actor: str,
) -> list[Started | PageantError]:
    """Start a run of ``definition_id``'s published version now for each of ``starts``;
    answers, in order, each item's run or the error that refused it.

    Each item is refused exactly as :func:`pageant.runs.create.start_now` would refuse it
    (NotFound, Invalid, Conflict); the accepted ones' runs commit in one transaction, and
    the answer comes once they have.
    """
    now = host.clock.now()
    checked_version, refused = await _check_option_values(host, definition_id, starts)

    async def start_all(conn: AsyncConnection, batch: Batch | None) -> list[Started | PageantError]:
        answers: list[Started | PageantError] = []
        scopes: dict[str, tuple[int, dict[str, Any]]] = {}
        for index, start in enumerate(starts):
            try:
                answers.append(await _start_one(conn, batch, index, start, scopes))
            except PageantError as refusal:
                # Nothing of this item is written yet: the transaction goes on.
                answers.append(refusal)
        return answers

    async def _start_one(
        conn: AsyncConnection,
        batch: Batch | None,
        index: int,
        start: Start,
        scopes: dict[str, tuple[int, dict[str, Any]]],
    ) -> Started:
        """The run of one item, or the refusal it raises before writing anything
        (``scopes``: each scope the batch starts so far, with its item and values)."""
        planned = await plan_start(conn, definition_id, start.scope, start.params, now, batch)
        values = run_params.with_scope(planned.values, planned.scope)
        if planned.version_id != checked_version and takes_option_values(
            planned.spec, values, host.registry
        ):
            raise Conflict(
                f"event {definition_id} was published again while it was being started; "
                "start this run again"
            )
        if index in refused:
            raise refused[index]
        earlier = scopes.get(planned.scope)
        if earlier is not None and earlier[1] != planned.values:
            raise Conflict(
                f'runs[{index}] starts the scope "{planned.scope}" that runs[{earlier[0]}] '
                "starts with other params; one event's runs at one instant are told apart "
                "by their scope",
                details=[f"runs[{index}].scope: the same as runs[{earlier[0]}]"],
            )
        scopes.setdefault(planned.scope, (index, planned.values))
        run_id, created = await create_planned(
            conn, host, definition_id, planned, now=now, actor=actor, batch=batch
        )
        return Started(run_id, created)

    answers: list[Started | PageantError] = await host.outcomes.run(start_all)
    if any(isinstance(answer, Started) and answer.created for answer in answers):
        host.wake(advance_only=True)  # runs due now: advance's to start
    return answers


async def _check_option_values(
    host: Host, definition_id: int, starts: Sequence[Start]
) -> tuple[int | None, dict[int, PageantError]]:
    """The published version the items' values were checked against (None: none is
    published), and each item whose values its option sources refuse now, by index.

    An item whose values do not fit their declarations is left for the start to refuse."""
    async with host.db.connect() as conn:
        _, version = await start_facts(conn, definition_id, None)
    if version is None:
        return None, {}
    spec = version.spec if isinstance(version.spec, dict) else {}
    answers = Answers(host.registry)
    refused: dict[int, PageantError] = {}
    for index, start in enumerate(starts):
        given = dict(start.params)
        if start.scope:
            given[run_params.SCOPE] = start.scope
        try:
            values = run_params.values_for(spec.get("params"), given)
        except Invalid:
            continue
        values = run_params.with_scope(values, run_params.scope_of(values))
        if not takes_option_values(spec, values, host.registry):
            continue
        problems, _ = await check_run_values(spec, values, host.registry, answers)
        if problems:
            refused[index] = Invalid("the run was not started", details=problems)
    return version.id, refused
