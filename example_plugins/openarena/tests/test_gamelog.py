"""The game log: real lines captured from an OpenArena server read into trigger firings,
and the follower across rotation, truncation, a partial last line and a restart."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pageant_openarena.gamelog import Follower, GameLog

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fired(*files: str) -> list[tuple[str, dict[str, object]]]:
    log = GameLog("main")
    out = []
    for name in files:
        for line in (FIXTURES / name).read_text(encoding="latin-1").splitlines():
            out += [(f.trigger, f.payload) for f in log.read(line)]
    return out


def test_a_real_match_reads_as_joins_frags_chat_and_its_end() -> None:
    happened = fired("games.log")
    kinds = [trigger for trigger, _ in happened]
    assert kinds.count("openarena.frag") == 5
    assert kinds.count("openarena.match.started") == 2
    # The first match ends by its fraglimit (Exit, then ShutdownGame: one end); the second
    # by the server's stop (ShutdownGame alone).
    ends = [p["reason"] for t, p in happened if t == "openarena.match.ended"]
    assert ends == ["Fraglimit hit.", "shutdown"]
    assert happened[0] == ("openarena.match.started", {"map": "oa_dm1", "server": "main"})
    joined = [p["name"] for t, p in happened if t == "openarena.player.joined"]
    # Sarge and Major join; Major is kicked; Grunt and Major join; the map restarts and
    # everyone begins again without having left: no second join.
    assert joined == ["Sarge", "Major", "Grunt", "Major"]
    assert all(p["bot"] is True for t, p in happened if t == "openarena.player.joined")
    first_frag = next(p for t, p in happened if t == "openarena.frag")
    assert first_frag == {
        "killer": "Major",
        "victim": "Sarge",
        "weapon": "MOD_SHOTGUN",
        "means": "a shotgun",
        "killer_is_bot": True,
        "server": "main",
    }
    chat = [p for t, p in happened if t == "openarena.chat"]
    assert chat[0] == {
        "name": "Sarge",
        "text": "Back in my day, frags weren't so cheap.",
        "server": "main",
    }


def test_a_kick_a_suicide_and_lava_are_frags_with_the_world_or_the_victim_as_killer() -> None:
    frags = [p for t, p in fired("games.log", "lava-and-suicide.log") if t == "openarena.frag"]
    kicked = frags[2]  # a kicked player dies by MOD_SUICIDE at the world's hand
    assert (kicked["killer"], kicked["victim"], kicked["weapon"]) == (
        "world",
        "Major",
        "MOD_SUICIDE",
    )
    assert kicked["killer_is_bot"] is False
    suicide, _, lava = frags[-3:]
    assert (suicide["killer"], suicide["victim"]) == ("Sarge2", "Sarge2")
    assert (lava["killer"], lava["weapon"]) == ("world", "MOD_LAVA")


def test_the_tally_counts_frags_of_players_only() -> None:
    log = GameLog("main")
    for name in ("games.log", "lava-and-suicide.log"):
        for line in (FIXTURES / name).read_text(encoding="latin-1").splitlines():
            log.read(line)
    assert log.tally == {"Major": 2, "Sarge": 2, "Grunt": 1}


def test_lines_that_are_not_happenings_fire_nothing() -> None:
    log = GameLog("main")
    for line in ["", "garbage", "  0:13 Item: 1 weapon_lightning", "  0:16 ClientBegin: 9"]:
        assert log.read(line) == []


# ── the follower ─────────────────────────────────────────────────────────────

Follow = Callable[[Path, Path], Follower]


@pytest.fixture
def follow() -> Iterator[Follow]:
    """Makes followers, and closes each at the end of the test."""
    made: list[Follower] = []

    def make(log: Path, state: Path) -> Follower:
        made.append(Follower(log, state))
        return made[-1]

    yield make
    for follower in made:
        follower.close()


def test_the_first_look_starts_at_the_end_then_reads_what_is_added(
    tmp_path: Path, follow: Follow
) -> None:
    log = tmp_path / "games.log"
    log.write_text("  0:01 old line\n")
    follower = follow(log, tmp_path / "state.json")
    assert follower.poll() == []
    with log.open("a") as out:
        out.write("  0:02 new line\n")
    assert follower.poll() == ["  0:02 new line"]
    assert follower.poll() == []


def test_a_partial_last_line_waits_for_its_newline(tmp_path: Path, follow: Follow) -> None:
    log = tmp_path / "games.log"
    log.write_text("")
    follower = follow(log, tmp_path / "state.json")
    follower.poll()
    with log.open("a") as out:
        out.write("  0:02 Kill: 0 1 4: Sarge ki")
    assert follower.poll() == []
    with log.open("a") as out:
        out.write("lled Grunt by MOD_GRENADE\n")
    assert follower.poll() == ["  0:02 Kill: 0 1 4: Sarge killed Grunt by MOD_GRENADE"]


def test_a_rotated_log_is_read_to_its_end_then_the_new_one_from_its_start(
    tmp_path: Path, follow: Follow
) -> None:
    log = tmp_path / "games.log"
    log.write_text("")
    follower = follow(log, tmp_path / "state.json")
    follower.poll()
    with log.open("a") as out:
        out.write("a\n")
    os.rename(log, tmp_path / "games.log.1")
    with (tmp_path / "games.log.1").open("a") as out:
        out.write("b\n")  # written to the old file after the rename
    log.write_text("c\n")
    assert follower.poll() == ["a", "b", "c"]


def test_a_truncated_log_is_read_from_its_start(tmp_path: Path, follow: Follow) -> None:
    log = tmp_path / "games.log"
    log.write_text("")
    follower = follow(log, tmp_path / "state.json")
    follower.poll()
    with log.open("a") as out:
        out.write("one line that is long\n")
    assert follower.poll() == ["one line that is long"]
    with log.open("r+") as out:
        out.truncate(0)
        out.write("x\n")
    assert follower.poll() == ["x"]


def test_a_restart_goes_on_where_it_was_and_never_reads_a_line_twice(
    tmp_path: Path, follow: Follow
) -> None:
    log, state = tmp_path / "games.log", tmp_path / "state.json"
    log.write_text("")
    first = follow(log, state)
    first.poll()
    with log.open("a") as out:
        out.write("seen\n")
    assert first.poll() == ["seen"]
    first.close()
    with log.open("a") as out:
        out.write("while away\n")  # pageant is down; the server goes on writing
    again = follow(log, state)
    assert again.poll() == ["while away"]


def test_a_log_replaced_while_pageant_was_away_is_read_from_its_start(
    tmp_path: Path, follow: Follow
) -> None:
    log, state = tmp_path / "games.log", tmp_path / "state.json"
    log.write_text("")
    first = follow(log, state)
    first.poll()
    first.close()
    os.rename(log, tmp_path / "games.log.1")
    log.write_text("fresh\n")
    assert follow(log, state).poll() == ["fresh"]


def test_a_missing_log_is_waited_for(tmp_path: Path, follow: Follow) -> None:
    log = tmp_path / "games.log"
    follower = follow(log, tmp_path / "state.json")
    assert follower.poll() == []
    log.write_text("x\n")
    # Never looked at before: the file's first look starts at its end.
    assert follower.poll() == []
