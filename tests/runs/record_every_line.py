"""A pytest plugin that keeps every run-log record the host writes while other tests run.

:mod:`tests.runs.test_log_sentences` runs chosen tests of the engine, the ledger, the gates
and the controls in a child pytest with this plugin, so the records it renders are the ones
the engine wrote in those real runs, not dicts written for the test. Each record is kept
with the test that wrote it, as a JSON line in ``$PAGEANT_RECORDS``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

_current: list[str] = [""]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _current[0] = item.nodeid


def pytest_configure(config: pytest.Config) -> None:
    from pageant.db import runlog

    path = os.environ["PAGEANT_RECORDS"]
    written = runlog.write

    async def write(conn: Any, run_id: int, kind: Any, **line: Any) -> None:
        await written(conn, run_id, kind, **line)
        record = {
            "kind": str(kind),
            "phase": line.get("phase"),
            "step_id": line.get("step_id"),
            "actor": line.get("actor"),
            "at": runlog._json_ready(line["at"]),
            "detail": runlog._json_ready(line.get("detail")),
            "test": _current[0],
        }
        with Path(path).open("a", encoding="utf-8") as out:  # noqa: ASYNC230 - one short line, in a test
            out.write(json.dumps(record, default=str) + "\n")

    runlog.write = write  # type: ignore[assignment]  # the same call, kept as it passes
