"""The walk of one step from the tick to the plugin call and back, as a reader follows it.

Runs one run of one ``core.announce`` step (the ``core.log`` leg) in one tick, and notes
the stack of pageant functions at each landmark of the step: the tick, the claim kept and
made, the plugin's ``perform``, the finish kept and made, and the run's loop taking the
answer back. A stack in a task the engine started is read on from where it was started
(the run's task from the advance stage's spawn, the group commit's writer from the write
handed to it), so each landmark's stack is the whole path to it from the tick.

Between two landmarks the walk climbs from the first stack to the frame the two share and
goes down to the second: every frame left is a *climb back up*, every frame entered a move
down, and *moves* counts both. *Files* counts the source files the walk passes through.

The *static walk* is the same path as a reader follows it in the source, file by file: the
call that hands work to a task (``Engine.spawn``, the group commit's ``WriteQueue.run``) is
a step of it like any call, and the functions one after another in the same file are one
stop (a reader moving inside a file climbs nothing). Its moves and climbs are between files.

    python benchmarks/step_walk.py            # the figures, and the walk itself
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchdb import scratch_database
from step_statements import _publish

import pageant
import pageant.builtin_plugins as builtin_plugins
from pageant.db import group as group_module
from pageant.db import steps
from pageant.engine import Engine, dispatch
from pageant.hosting import Host
from pageant.runs.create import start_now
from pageant.support.clock import FakeClock
from pageant.support.settings import Settings

#: The folders whose functions are the walk (the host, and the built-in plugins).
ROOTS = (Path(pageant.__file__).resolve().parent, Path(builtin_plugins.__file__).resolve().parent)
BACK = "back in the run's loop"
Frame = tuple[str, str]


def _stack(skip: int) -> list[Frame]:
    frames: list[Frame] = []
    frame = sys._getframe(skip + 1)
    while frame is not None:
        path = Path(frame.f_code.co_filename).resolve()
        for root in ROOTS:
            if root in path.parents:
                where = f"{root.name}/{path.relative_to(root)}"
                frames.append((where, frame.f_code.co_qualname))
                break
        frame = frame.f_back
    frames.reverse()
    return frames


class Walk:
    """The landmarks of one step, each with its whole stack from the tick."""

    def __init__(self) -> None:
        self.marks: list[tuple[str, list[Frame]]] = []
        #: The same landmarks as a reader reaches them (see :meth:`static`).
        self.read: list[tuple[str, list[Frame]]] = []
        self.started_from: dict[str, tuple[list[Frame], Frame]] = {}
        self.queued_from: tuple[list[Frame], Frame] = ([], ("", ""))
        self.claimed = self.ended = False

    def prefix(self, handed: bool = False) -> list[Frame]:
        task = asyncio.current_task()
        name = task.get_name() if task is not None else ""
        stack, by = (
            self.queued_from
            if name == "pageant-outcomes"
            else (self.started_from.get(name, ([], ("", ""))))
        )
        return [*stack, by] if handed and by[0] else stack

    def mark(self, label: str, leaf: Frame | None = None, skip: int = 1) -> None:
        # The step's walk starts at its claim (its run's start and phase entry are the
        # run's, not the step's) and ends when its answer is back in the run's loop.
        claim = "claim" in label and "made" not in label
        if self.ended or not (self.claimed or claim):
            return
        self.claimed = True
        own = _stack(skip + 1)
        for marks, handed in ((self.marks, False), (self.read, True)):
            stack = self.prefix(handed) + own
            marks.append((label, [*stack, leaf] if leaf else stack))
        self.ended = label == BACK

    def static(self) -> list[tuple[str, list[Frame]]]:
        """The reader's landmarks file by file: each stack with the hand-offs to tasks in
        it, and the frames one after another in the same file made one."""
        walk = []
        for label, stack in self.read:
            files: list[Frame] = []
            for where, _ in stack:
                if not files or files[-1][0] != where:
                    files.append((where, ""))
            walk.append((label, files))
        return walk

    def figures(
        self, marks: list[tuple[str, list[Frame]]] | None = None
    ) -> tuple[int, int, int, list[str]]:
        moves = climbs = 0
        files: set[str] = set()
        lines: list[str] = []
        previous: list[Frame] = []
        for label, stack in self.marks if marks is None else marks:
            shared = 0
            while shared < min(len(previous), len(stack)) and previous[shared] == stack[shared]:
                shared += 1
            up, down = len(previous) - shared, len(stack) - shared
            climbs += up
            moves += up + down
            files.update(where for where, _ in stack)
            lines.append(f"{label}: up {up}, down {down}")
            lines.extend(
                f"    {where}:{name}" if name else f"    {where}" for where, name in stack[shared:]
            )
            previous = stack
        return moves, climbs, len(files), lines


def _kept(args: tuple[Any, ...], what: str) -> bool:
    # A flush marks the walk only when it has something to make (the batch, or before the
    # batch was a value, the shared scope of the connection).
    held = args[0]
    if not hasattr(held, what):
        scope = getattr(__import__("pageant.db.shared").db.shared, "of", None)
        held = scope(held) if scope else None
    return bool(getattr(held, what, None))


def _wrap(owner: Any, name: str, walk: Walk, label: str, kept: str | None = None) -> None:
    real: Callable[..., Any] | None = getattr(owner, name, None)
    if real is None:
        return
    code = getattr(real, "__code__", None)
    where = Path(code.co_filename).resolve() if code else None
    root = next((r for r in ROOTS if where and r in where.parents), None)
    leaf = (f"{root.name}/{where.relative_to(root)}", name) if root and where else ("", name)
    if asyncio.iscoroutinefunction(real):

        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            if kept is None or _kept(args, kept):
                walk.mark(label, leaf)
            return await real(*args, **kwargs)

    else:

        def wrapped(*args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]  # one name, two shapes
            walk.mark(label, leaf)
            return real(*args, **kwargs)

    setattr(owner, name, wrapped)


def _instrument(walk: Walk) -> None:
    _wrap(steps, "claim_step", walk, "the claim (claim_step)")
    _wrap(steps, "keep_claim", walk, "the claim kept (keep_claim)")
    _wrap(steps, "flush_claims", walk, "the kept claims made (flush_claims)", "claims")
    _wrap(dispatch, "run_with_envelope", walk, "the plugin call (perform)")
    _wrap(steps, "finish_step", walk, "the finish (finish_step)")
    _wrap(steps, "keep_finish", walk, "the finish kept (keep_finish)")
    _wrap(steps, "flush_finishes", walk, "the kept finishes made (flush_finishes)", "finishes")
    real_spawn = Engine.spawn
    real_run = group_module.OutcomeBatch.run

    def spawn(self: Engine, run_id: int, work: Any) -> None:
        walk.started_from[f"pageant-run-{run_id}"] = (
            _stack(1),
            (f"{ROOTS[0].name}/engine/loop.py", "Engine.spawn"),
        )
        real_spawn(self, run_id, work)

    async def run(self: Any, write: Any) -> Any:
        by = (f"{ROOTS[0].name}/db/group.py", "WriteQueue.run")
        walk.queued_from = (walk.prefix() + _stack(1), by)
        return await real_run(self, write)

    Engine.spawn = spawn  # type: ignore[method-assign]  # measuring, not running
    group_module.OutcomeBatch.run = run  # type: ignore[method-assign]  # measuring, not running


async def measure() -> None:
    async with scratch_database(None) as db:
        clock = FakeClock(datetime(2027, 3, 1, 12, 0, tzinfo=UTC))
        host = Host(Settings(), clock=clock, db=db, discover=False)
        step = {"action": "core.announce", "params": {"leg": "core.log", "message": "hello"}}
        definition_id = await _publish(db, clock.now(), [step], 1)
        await start_now(host, definition_id, scope="", actor="bench")
        walk = Walk()
        _instrument(walk)
        async with Engine(host) as engine:
            real_dispatch = dispatch.dispatch_step

            async def dispatched(*args: Any, **kwargs: Any) -> str:
                outcome = await real_dispatch(*args, **kwargs)
                walk.mark(BACK, skip=0)
                return outcome

            for module in list(sys.modules.values()):
                if (
                    getattr(module, "dispatch_step", None) is real_dispatch
                    and module is not dispatch
                ):
                    module.dispatch_step = dispatched
            tick = ("the tick", [(f"{ROOTS[0].name}/engine/loop.py", "Engine.tick")])
            walk.marks.append(tick)
            walk.read.append(tick)
            await engine.tick()
        moves, climbs, files, lines = walk.figures()
        print("\n".join(lines))
        print(f"{files} files; {moves} moves, {climbs} of them climbing back up")
        moves, climbs, files, lines = walk.figures(walk.static())
        print("\nthe static walk, file by file:")
        print("\n".join(lines))
        print(f"static: {files} files; {moves} moves between files, {climbs} climbs back up")


if __name__ == "__main__":
    asyncio.run(measure())
