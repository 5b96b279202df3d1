"""Render the run log's detail shapes into ``docs/runs.md`` from the writers.

Each kind of run log line has one writer in :mod:`pageant.db.runlog`; its keyword arguments
are the line's detail, and its docstring says what the arguments alone cannot (a fixed
``to``, the fields of a mapping it spreads). This module writes that down between the
markers of ``docs/runs.md``, so the guide can never say something the code does not.
Regenerate with::

    python -m pageant.kit.logdocs docs/runs.md
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pageant.db.log_kinds import LogKind
from pageant.db.runlog import READS, WRITERS, detail_fields

BEGIN = (
    "<!-- log-details: rendered from the writers of pageant.db.runlog by "
    "`python -m pageant.kit.logdocs docs/runs.md` -->"
)
END = "<!-- /log-details -->"


def _field(key: str, kind: str, always: bool) -> str:
    shown = kind if always else kind.removesuffix(" | None")
    return f"`{key}`{'' if always else '?'} {shown.replace(' | None', ' or null')}"


def _fields(writer: Callable[..., Any]) -> str:
    return ", ".join(_field(*field) for field in detail_fields(writer))


def _handed(writer: Callable[..., Any]) -> str:
    """What a writer is handed to place its line: the run, or a step, gate or ledger row."""
    return next(iter(list(inspect.signature(writer).parameters)[1:]))


def render() -> str:
    """The block between the markers, markers included: a row a kind, in the enumeration's
    order, with its writer and what it is handed, the fields it reads from that, the fields
    it takes, and the writer's own words."""
    out = [
        BEGIN,
        "| kind | writer | read from it | detail | what it says |",
        "| --- | --- | --- | --- | --- |",
    ]
    for kind in LogKind:
        writer = WRITERS[kind]
        call = f"`{writer.__name__}({_handed(writer)})`"
        reads = ", ".join(f"`{key}`" for key in READS[kind])
        said = " ".join((inspect.getdoc(writer) or "").split()).replace("``", "`")
        out.append(f"| `{kind.value}` | {call} | {reads} | {_fields(writer)} | {said} |")
    out.append(END)
    return "\n".join(out)


def rendered_into(text: str) -> str:
    """``text`` with its block replaced by :func:`render`; ValueError if it has none."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {BEGIN!r} ... {END!r} block to render into")
    return text[:start] + render() + text[end + len(END) :]


def main(argv: list[str] | None = None) -> None:
    """``python -m pageant.kit.logdocs PATH``: render the block into PATH, or print it."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        sys.stdout.write(render() + "\n")
        return
    path = Path(args[0])
    path.write_text(rendered_into(path.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main()
