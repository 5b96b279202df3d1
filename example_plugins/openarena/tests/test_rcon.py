"""The RCON client against a fake server on a local UDP port: answers in pieces, lost
requests, a wrong password, a slow server and bytes that are not an answer."""

from __future__ import annotations

import itertools

import pytest
from fake_rcon import PREFIX, Reply, fake_rcon, printed
from pageant_openarena.pacing import Bucket
from pageant_openarena.rcon import BadPassword, NoAnswer, Rcon, RconError, strip_colours

GRAVITY = '"g_gravity" is:"800^7", the default\n'


def client(port: int, *, burst: int = 100, per_second: float = 100.0, **kw: float) -> Rcon:
    options = {"timeout": 0.3, "retries": 2, "settle": 0.05, "resend": 0.3, **kw}
    return Rcon("127.0.0.1", port, "secret", bucket=Bucket(burst, per_second), **options)


def gravity(password: str, command: str, nth: int) -> Reply:
    return [(0, printed(GRAVITY if password == "secret" else "Bad rconpassword.\n"))]


async def test_an_answer_is_read_with_its_colour_codes_stripped() -> None:
    async with fake_rcon(gravity) as fake:
        answer = await client(fake.port).command("g_gravity", idempotent=True)
    assert answer == '"g_gravity" is:"800", the default\n'
    assert [(p, c) for _, p, c in fake.asked] == [("secret", "g_gravity")]


async def test_an_answer_in_several_datagrams_is_joined_in_order() -> None:
    parts = ["Server info settings:\n", "com_protocol 71\nfraglimit 0\n", "g_timestamp x\n"]

    def serverinfo(password: str, command: str, nth: int) -> Reply:
        return [(0.01 * i, printed(part)) for i, part in enumerate(parts)]

    async with fake_rcon(serverinfo) as fake:
        answer = await client(fake.port).command("serverinfo", idempotent=True)
    assert answer == "".join(parts)


async def test_a_piece_later_than_the_settle_time_is_not_part_of_the_answer() -> None:
    def slow_tail(password: str, command: str, nth: int) -> Reply:
        return [(0, printed("first\n")), (0.25, printed("too late\n"))]

    async with fake_rcon(slow_tail) as fake:
        answer = await client(fake.port, settle=0.05).command("status", idempotent=True)
    assert answer == "first\n"


async def test_a_lost_request_is_asked_again_when_it_is_a_read() -> None:
    def lose_first(password: str, command: str, nth: int) -> Reply:
        return [] if nth == 1 else gravity(password, command, nth)

    async with fake_rcon(lose_first) as fake:
        answer = await client(fake.port).command("g_gravity", idempotent=True)
    assert answer.startswith('"g_gravity" is:"800"')
    assert len(fake.asked) == 2


async def test_a_lost_answer_to_a_change_is_not_sent_again() -> None:
    async with fake_rcon(lambda p, c, n: []) as fake:
        with pytest.raises(NoAnswer, match=r"within 0.3 s \(sent once, not again\)"):
            await client(fake.port).command("say hello", idempotent=False)
    assert [c for _, _, c in fake.asked] == ["say hello"]


async def test_a_read_gives_up_after_its_retries() -> None:
    async with fake_rcon(lambda p, c, n: []) as fake:
        with pytest.raises(NoAnswer, match=r"within 0.9 s \(sent again for 0.9 s\)"):
            await client(fake.port, retries=2).command("status", idempotent=True)
    # A copy every half to whole resend (jittered): three to six in 0.9 s.
    assert 3 <= len(fake.asked) <= 6


async def test_a_read_is_sent_again_every_resend_and_the_first_answer_is_taken() -> None:
    # The server dropped the first two copies (another client spent its ration).
    async with fake_rcon(lambda p, c, n: [] if n <= 2 else gravity(p, c, n)) as fake:
        rcon = client(fake.port, timeout=1.0, retries=0, resend=0.2)
        assert "800" in await rcon.command("g_gravity", idempotent=True)
    times = [t for t, _, _ in fake.asked]
    assert len(times) == 3
    assert all(0.08 <= b - a <= 0.6 for a, b in itertools.pairwise(times))
    assert (rcon.sent, rcon.answered) == (3, 1)


async def test_copies_the_server_dropped_give_their_tokens_back() -> None:
    # Three copies sent, two dropped: the server counted one request, and so does the bucket.
    async with fake_rcon(lambda p, c, n: [] if n <= 2 else gravity(p, c, n)) as fake:
        rcon = client(fake.port, burst=5, per_second=0.01, timeout=1.0, retries=0, resend=0.1)
        await rcon.command("g_gravity", idempotent=True)
    assert len(fake.asked) == 3
    assert rcon.bucket.tokens() == pytest.approx(4, abs=0.01)


async def test_a_wrong_password_is_recognised() -> None:
    async with fake_rcon(gravity) as fake:
        rcon = Rcon("127.0.0.1", fake.port, "wrong", timeout=0.3, settle=0.05)
        with pytest.raises(BadPassword, match=f"127.0.0.1:{fake.port} refused the rcon password"):
            await rcon.command("g_gravity", idempotent=True)
    assert len(fake.asked) == 1  # a refusal is an answer: not asked again


@pytest.mark.parametrize(("delay", "answered"), [(0.1, True), (0.5, False)])
async def test_a_slow_server_is_heard_within_the_timeout_and_not_after(
    delay: float, answered: bool
) -> None:
    def slow(password: str, command: str, nth: int) -> Reply:
        return [(delay, printed(GRAVITY))]

    async with fake_rcon(slow) as fake:
        rcon = client(fake.port, timeout=0.3, retries=0)
        if answered:
            assert "800" in await rcon.command("g_gravity", idempotent=True)
        else:
            with pytest.raises(NoAnswer):
                await rcon.command("g_gravity", idempotent=True)


async def test_bytes_that_are_not_an_answer_are_ignored() -> None:
    def garbage_first(password: str, command: str, nth: int) -> Reply:
        junk = [b"\x00\x01garbage", PREFIX + b"statusResponse\n\\x\\y", b"print\nno prefix"]
        return [(0, j) for j in junk] + [(0.02, printed(GRAVITY))]

    async with fake_rcon(garbage_first) as fake:
        answer = await client(fake.port).command("g_gravity", idempotent=True)
    assert answer == '"g_gravity" is:"800", the default\n'


async def test_only_garbage_is_no_answer() -> None:
    async with fake_rcon(lambda p, c, n: [(0, b"\xff\xff\xff\xffjunk")]) as fake:
        with pytest.raises(NoAnswer):
            await client(fake.port, retries=0).command("status", idempotent=True)


async def test_a_command_that_would_smuggle_a_second_one_is_refused_unsent() -> None:
    async with fake_rcon(gravity) as fake:
        with pytest.raises(RconError, match="refusing to send"):
            await client(fake.port).command("g_gravity 300;quit", idempotent=False)
    assert fake.asked == []


@pytest.mark.parametrize(("burst", "shortest", "longest"), [(3, 0.5, 9.0), (100, 0.0, 0.45)])
async def test_requests_past_the_burst_wait_for_the_bucket_to_refill(
    burst: int, shortest: float, longest: float
) -> None:
    # ioquake3 drops, silently, rcon requests past a burst of ten and then one a second.
    async with fake_rcon(gravity) as fake:
        rcon = client(fake.port, burst=burst, per_second=5.0)
        for _ in range(6):
            await rcon.command("g_gravity", idempotent=True)
    times = [t for t, _, _ in fake.asked]
    assert max(b - a for a, b in itertools.pairwise(times[:3])) < 0.1  # the burst goes at once
    # Three past a burst of three: at least about three refills (each answer takes 0.05 s).
    assert shortest <= times[-1] - times[0] <= longest


def test_colour_codes_are_stripped_and_a_lone_caret_kept() -> None:
    assert strip_colours("^1Sarge^7 ^^ 3^") == "Sarge ^^ 3^"
