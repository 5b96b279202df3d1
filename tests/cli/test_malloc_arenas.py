"""``pageant serve`` keeps glibc's allocator to a few arenas (its threads share their free pages).

Arenas belong to the whole process, so each case counts them in a fresh interpreter: six
threads allocate at once, then glibc's ``malloc_info`` lists one ``<heap>`` an arena.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from pageant.cli.serving import MALLOC_ARENAS, limit_malloc_arenas

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="glibc's allocator is a Linux matter"
)

_PROBE = textwrap.dedent(
    """
    import ctypes, os, sys, tempfile, threading
    from pageant.cli.serving import limit_malloc_arenas

    environ = {"MALLOC_ARENA_MAX": "8"} if sys.argv[1] == "operator" else {}
    if sys.argv[1] != "untouched":
        print("took", limit_malloc_arenas(environ=environ))
    threads = 6
    together = threading.Barrier(threads + 1)
    kept = []

    def allocate():
        kept.append([bytearray(64 * 1024) for _ in range(4)])  # below mmap's threshold
        together.wait()
        together.wait()

    started = [threading.Thread(target=allocate) for _ in range(threads)]
    for thread in started:
        thread.start()
    together.wait()
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    path = tempfile.mkstemp()[1]
    stream = ctypes.c_void_p(libc.fopen(path.encode(), b"w"))
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    together.wait()
    for thread in started:
        thread.join()
    with open(path) as listing:
        print("arenas", listing.read().count("<heap nr="))
    os.remove(path)
    """
)


def _probe(mode: str) -> tuple[str | None, int]:
    environ = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, mode],
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    return lines.get("took"), int(lines["arenas"])


def test_six_threads_get_arenas_of_their_own_when_nothing_limits_them() -> None:
    took, arenas = _probe("untouched")
    assert took is None
    assert arenas > MALLOC_ARENAS


def test_the_limit_keeps_six_threads_to_its_arenas() -> None:
    took, arenas = _probe("limited")
    assert took == "True"
    assert arenas <= MALLOC_ARENAS


def test_an_operators_malloc_arena_max_is_left_to_stand() -> None:
    took, arenas = _probe("operator")
    assert took == "False"
    assert arenas > MALLOC_ARENAS


def test_an_allocator_without_mallopt_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoMallopt:
        def __init__(self, name: object) -> None:
            pass

        def __getattr__(self, name: str) -> object:
            raise AttributeError(name)

    monkeypatch.setattr("pageant.cli.serving.ctypes.CDLL", NoMallopt)
    assert limit_malloc_arenas(environ={}) is False
