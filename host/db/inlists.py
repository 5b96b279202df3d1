"""``IN`` lists padded to a few lengths, so a statement over a set has a few texts, not one
a size.

An expanding ``IN (...)`` is written with one placeholder a value, so a statement over 997
servers and the same statement over 998 are two texts. SQLite's driver prepares each text
and every pooled connection keeps the last :data:`pageant.db.sqlite_driver.STATEMENT_CACHE`
it ran, by text: a statement over a thousand values, prepared, holds about 200 KiB. The game
link's periodic check runs over the servers whose syncs wait on this host, a count that
moves with every sync, and so filled the pool's caches with such statements one new size at
a time: in a host holding 1,000 syncs, SQLite's own memory grew by about 4 MiB a minute
(measured with the pool's 30 connections kept open). Padded, the check's list is 1,024
values long whatever the count between 513 and 1,024, and its statement is prepared once a
connection (SQLite's memory then stayed between 5 and 6 MiB).

A list is padded by repeating its last value: ``x IN (a, b, b)`` is ``x IN (a, b)``, so
every statement answers and changes what it did unpadded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

#: Past this length a list is padded to a multiple of it rather than to a power of two, so
#: padding never doubles a long list (SQLite takes at most 32,766 values a statement).
STEP = 1024


def padded_length(count: int) -> int:
    """The length a list of ``count`` values is padded to: the next power of two up to
    :data:`STEP`, the next multiple of :data:`STEP` beyond."""
    if count <= 1:
        return count
    if count <= STEP:
        return 1 << (count - 1).bit_length()
    return -(-count // STEP) * STEP


def padded(values: Sequence[T]) -> list[T]:
    """``values`` padded to :func:`padded_length` by repeating the last (an empty list
    stays empty: a caller asks nothing of an empty set)."""
    out = list(values)
    if out:
        out.extend([out[-1]] * (padded_length(len(out)) - len(out)))
    return out
