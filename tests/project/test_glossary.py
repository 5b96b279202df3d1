"""docs/glossary.md names each term once, one line each, and keeps the words that could mean
two things apart."""

from __future__ import annotations

import re
from pathlib import Path

GLOSSARY = Path(__file__).resolve().parents[2] / "docs" / "glossary.md"
ENTRY = re.compile(r"^- \*\*(?P<term>[^*]+)\*\* — (?P<meaning>.+)$")


def entries() -> list[str]:
    lines = [line for line in GLOSSARY.read_text().splitlines() if line.startswith("- ")]
    terms = []
    for line in lines:
        found = ENTRY.match(line)
        assert found is not None, f"not a one-line '- **term** — meaning' entry: {line!r}"
        terms.append(found.group("term"))
    return terms


def test_each_term_is_named_once() -> None:
    terms = entries()
    assert sorted({t for t in terms if terms.count(t) > 1}) == []


def test_the_words_that_could_mean_two_things_each_have_their_own_term() -> None:
    terms = set(entries())
    for term in (
        "run",
        "step",
        "phase",
        "gate",
        "tick stage",
        "announce leg",
        "claim lease",
        "borrowed-value lease",
        "schedule reconciliation",
        "plugin reconcile",
        "dormant",
        "disposition",
        "park",
    ):
        assert term in terms, term
    assert "leg" not in terms and "lease" not in terms and "reconcile" not in terms
