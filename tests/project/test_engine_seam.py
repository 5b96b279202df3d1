"""The seam between the Host and its engine stays narrow, and the engine is reached one way.

Each member of :class:`pageant.hosting.EngineSeam` is something the host, or a stage it is
handed to, asks of the engine; a stage's own state lives with the stage, and what outlives
an engine (the pinned specs, the outage note) is the host's.
"""

from __future__ import annotations

from pageant.engine import Engine
from pageant.hosting import EngineSeam, Host

#: The most members the seam may have (issue 50 found 16).
MOST = 10


def _members(protocol: type) -> set[str]:
    own = {name for name in vars(protocol) if not name.startswith("_")}
    return own | set(getattr(protocol, "__annotations__", {}))


def test_the_engine_seam_has_ten_members_at_most() -> None:
    members = _members(EngineSeam)
    assert 0 < len(members) <= MOST, sorted(members)
    # A stage's own state is not the seam's.
    assert not members & {"last_prune_at", "unsettled_checked", "versions", "outage", "tick"}


def test_the_engine_provides_every_member_of_its_seam() -> None:
    missing = {name for name in _members(EngineSeam) if not hasattr(Engine, name)}
    # The attributes are set in __init__; read them off an instance's annotations instead.
    source = Engine.__init__.__code__.co_names
    assert {name for name in missing if name not in source} == set()


def test_the_host_reaches_its_engine_one_way() -> None:
    assert "engine" in Host.__init__.__code__.co_names
    assert not hasattr(Host, "runner")
    assert not hasattr(Host, "stopping")
    assert not hasattr(Host, "in_outcome_transaction")
