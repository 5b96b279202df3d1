"""The tutorial cannot drift from the plugin it walks: every Python excerpt on the page is a
verbatim slice of the shard plugin's source or tests, and the event it shows is the one
``pageant demo`` runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pageant.cli.showcase import demo_spec

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial.md"
SHARD = ROOT / "example_plugins" / "shard"
BLOCK = re.compile(r"```(?P<lang>\w+)\n(?P<body>.*?)```\n", re.S)


def blocks(lang: str) -> list[str]:
    return [m["body"] for m in BLOCK.finditer(TUTORIAL.read_text()) if m["lang"] == lang]


def test_every_python_excerpt_is_a_slice_of_the_shards_source() -> None:
    sources = {
        path.relative_to(SHARD).as_posix(): path.read_text()
        for folder in ("pageant_shard", "tests")
        for path in sorted((SHARD / folder).glob("*.py"))
    }
    excerpts = blocks("python")
    assert len(excerpts) >= 15
    for excerpt in excerpts:
        assert any(excerpt in text for text in sources.values()), (
            f"docs/tutorial.md shows code that is not in the shard plugin:\n{excerpt[:300]}"
        )


def test_the_entry_point_shown_is_the_distributions() -> None:
    (entry,) = [b for b in blocks("toml") if "entry-points" in b]
    assert entry in (SHARD / "pyproject.toml").read_text()


def test_the_muster_phase_shown_is_the_one_the_demo_runs() -> None:
    (shown,) = [json.loads(b) for b in blocks("json") if '"key": "muster"' in b]
    (muster,) = [p for p in demo_spec()["phases"] if p["key"] == "muster"]
    assert shown == muster


def test_the_tutorial_is_linked_from_the_readme_and_the_plugin_guide() -> None:
    assert "(docs/tutorial.md)" in (ROOT / "README.md").read_text()
    assert "(tutorial.md)" in (ROOT / "docs" / "plugin-authors.md").read_text()
