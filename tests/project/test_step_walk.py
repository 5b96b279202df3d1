"""The walk of one step stays short (issue 50): ``benchmarks/step_walk.py`` follows one
``core.announce`` step from the tick to the plugin's ``perform`` and back, at run time and
as a reader follows the source, and each walk climbs back up at most ten times.

The script is run as a process, as a reader runs it: it instruments the engine's modules
for the one tick it measures, which must not leak into the other tests."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Issue 50's bound on the climbs back up, in either walk.
MOST_CLIMBS = 10


def _walks() -> tuple[int, int]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "step_walk.py")],
        cwd=ROOT / "benchmarks",
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    )
    runtime = re.search(
        r"^\d+ files; \d+ moves, (\d+) of them climbing back up$", done.stdout, re.M
    )
    static = re.search(
        r"^static: \d+ files; \d+ moves between files, (\d+) climbs", done.stdout, re.M
    )
    assert runtime and static, done.stdout[-2000:]
    return int(runtime[1]), int(static[1])


def test_the_walk_of_one_step_climbs_back_up_at_most_ten_times() -> None:
    runtime, static = _walks()
    # A walk that lost its landmarks would climb nothing: both walks do climb.
    assert 0 < runtime <= MOST_CLIMBS, f"the runtime walk climbs {runtime} times"
    assert 0 < static <= MOST_CLIMBS, f"the static walk climbs {static} times"
