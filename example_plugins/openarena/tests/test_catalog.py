"""The bots' names: made from the step's key, so a retry finds the bots it added."""

from __future__ import annotations

from pageant_openarena.catalog import CHARACTERS, MIX, bot_names


def test_one_key_names_the_same_bots_every_time_and_another_key_others() -> None:
    first = bot_names("step-key-1", 3, None)
    assert first == bot_names("step-key-1", 3, None)
    assert [c for c, _ in first] == ["Sarge", "Grunt", "Major"]
    assert [n.rsplit("-", 1)[0] for _, n in first] == ["Sarge", "Grunt", "Major"]
    assert len({n for _, n in first}) == 3
    assert not {n for _, n in first} & {n for _, n in bot_names("step-key-2", 3, None)}


def test_a_named_character_is_every_bot_and_the_mix_is_of_the_games_characters() -> None:
    assert [c for c, _ in bot_names("k", 2, "Tony")] == ["Tony", "Tony"]
    assert set(MIX) <= set(CHARACTERS)
    # Eight bots, the most one step adds, still have names the game keeps whole.
    assert max(len(n) for _, n in bot_names("k", 8, "Cyber-Garg")) <= 31
