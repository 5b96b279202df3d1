"""``pageant serve`` writes its log from a thread of its own: the event loop only puts each
record on a queue (``QueueHandler``), a ``QueueListener`` formats and writes it, and a clean
stop writes every line still queued before the process exits."""

from __future__ import annotations

import json
import logging
import logging.handlers
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pageant.cli.serving import configure_logging
from pageant.support.settings import Settings
from tests.processes import Serve, command


@pytest.fixture
def root_kept() -> Iterator[None]:
    """The root logger's handlers and level as pytest set them, put back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def test_serve_logs_through_a_queue_and_writes_from_another_thread(root_kept, capsys) -> None:
    listener = configure_logging(Settings(log_format="json"))
    writers: list[str] = []
    try:
        root = logging.getLogger()
        assert [type(h).__name__ for h in root.handlers] == ["LineQueueHandler"]
        assert all(isinstance(h, logging.handlers.QueueHandler) for h in root.handlers)

        def note_thread(record: logging.LogRecord) -> bool:
            writers.append(threading.current_thread().name)
            return True

        listener.handlers[0].addFilter(note_thread)
        fields = {"run_id": 7}
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("pageant.runs").info(
                "run %d step.status: %s", 7, "done", extra=fields, exc_info=True
            )
        fields["run_id"] = 8  # the line is the call's, whenever the thread writes it
    finally:
        listener.stop()
    assert writers and threading.main_thread().name not in writers
    line = json.loads(capsys.readouterr().err.splitlines()[-1])
    assert line["msg"] == "run 7 step.status: done"
    assert line["logger"] == "pageant.runs"
    assert line["run_id"] == 7
    assert "ValueError: boom" in line["exc"]


def test_a_clean_stop_writes_every_queued_line(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'pageant.db'}"
    command(url, "db", "upgrade")
    serve = Serve(url, tmp_path / "serve.log")
    try:
        serve.signal(signal.SIGTERM)
        assert serve.wait(60) == 0
        lines = serve.log_lines()
    finally:
        serve.kill()
    messages = [line["msg"] for line in lines]
    assert any(m.startswith("received SIGTERM") for m in messages)
    # Logged last, just before the process exits: written by the listener's stop.
    assert messages[-1] == "stopped cleanly"
