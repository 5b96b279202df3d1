"""The contract-range grammar: does a plugin's range admit this host's contract version?

Three forms (``semver`` compares versions; it matches one comparison at a time, so the
grammar is this small layer over its ``Version``):

* ``^X[.Y[.Z]]`` - missing parts are 0; ``^1.2`` is ``>=1.2.0 <2.0.0``; ``^0.3`` is
  ``>=0.3.0 <0.4.0``; ``^0.0.3`` is ``>=0.0.3 <0.0.4``.
* ``~X.Y[.Z]`` - ``>=X.Y.Z <X.(Y+1).0``.
* space-separated comparisons (``>=1.2 <2``), every one of which must hold; each is one of
  ``>= > <= < =`` and a version with missing parts read as 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from semver import Version

_PARTIAL = r"(\d+)(?:\.(\d+))?(?:\.(\d+))?"
_CARET = re.compile(rf"^\^{_PARTIAL}$")
_TILDE = re.compile(r"^~(\d+)\.(\d+)(?:\.(\d+))?$")
_COMPARISON = re.compile(rf"^(>=|<=|>|<|=){_PARTIAL}$")

_OPS: dict[str, Callable[[Version, Version], bool]] = {
    ">=": lambda v, b: v >= b,
    ">": lambda v, b: v > b,
    "<=": lambda v, b: v <= b,
    "<": lambda v, b: v < b,
    "=": lambda v, b: v == b,
}


class BadRange(ValueError):
    """The range is not in the grammar."""


@dataclass(frozen=True)
class ContractRange:
    text: str
    bounds: tuple[tuple[str, Version], ...]

    def admits(self, version: str | Version) -> bool:
        v = version if isinstance(version, Version) else Version.parse(version)
        return all(_OPS[op](v, bound) for op, bound in self.bounds)

    @property
    def floor(self) -> Version:
        """The lowest version the range could admit: its highest lower bound (``>=``, ``>``
        or ``=``), or 0.0.0 when it has none. ``^1.1`` and ``>=1.1 <2`` answer 1.1.0."""
        lows = [bound for op, bound in self.bounds if op in (">=", ">", "=")]
        return max(lows, default=Version(0, 0, 0))

    def requires(self, version: str | Version) -> bool:
        """Whether every version the range admits is at least ``version``: a plugin whose
        range requires 1.2 was written to contract 1.2's rules and promises them; one on
        ``^1.1`` also runs on a 1.1 host, so it cannot be taken to promise what 1.2 added."""
        v = version if isinstance(version, Version) else Version.parse(version)
        return self.floor >= v


def _version(major: str, minor: str | None, patch: str | None) -> Version:
    return Version(int(major), int(minor or 0), int(patch or 0))


def parse_range(text: str) -> ContractRange:
    """Parse a contract range, raising :class:`BadRange` naming what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise BadRange(
            "bad contract range: empty; expected ^X.Y, ~X.Y or comparisons like >=1.2 <2"
        )
    text = text.strip()
    if m := _CARET.match(text):
        low = _version(*m.groups())
        if low.major > 0:
            high = Version(low.major + 1, 0, 0)
        elif low.minor > 0 or m.group(2) is None:
            high = Version(0, low.minor + 1, 0) if m.group(2) is not None else Version(1, 0, 0)
        else:
            high = Version(0, 0, low.patch + 1) if m.group(3) is not None else Version(0, 1, 0)
        return ContractRange(text, ((">=", low), ("<", high)))
    if m := _TILDE.match(text):
        low = _version(*m.groups())
        return ContractRange(text, ((">=", low), ("<", Version(low.major, low.minor + 1, 0))))
    parts = text.split()
    bounds = []
    for part in parts:
        m = _COMPARISON.match(part)
        if not m:
            raise BadRange(
                f"bad contract range {text!r}: {part!r} is not understood; "
                "expected ^X.Y, ~X.Y or comparisons like >=1.2 <2"
            )
        bounds.append((m.group(1), _version(*m.groups()[1:])))
    return ContractRange(text, tuple(bounds))
