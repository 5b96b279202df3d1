"""The types of what a query answers, as the rest of the host reads it.

SQLAlchemy types a row by the types of its columns; pageant reads rows by column name and
passes them on, so a row of any shape is an :data:`AnyRow`, and a row's mapping, or a plain
mapping built elsewhere (by a test, or from a request), is a :data:`Record`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy.engine import CursorResult, Row, RowMapping

#: A result row of any shape, read by column name (``row.status``).
AnyRow = Row[*tuple[Any, ...]]

#: A row read as a mapping (``row._mapping``), or a mapping of the same keys.
Record = Mapping[str, Any] | RowMapping


def columns_of(row: Any, names: Iterable[str]) -> dict[str, Any]:
    """The named columns of a row, by name, in the order given: a rendering that passes
    them on as they are."""
    return {name: getattr(row, name) for name in names}


def inserted_id(result: CursorResult[Any]) -> int:
    """The key of the row a single-row INSERT just made."""
    key = result.inserted_primary_key
    if key is None:  # only an INSERT answers a key; any other statement here is a bug
        raise TypeError("the statement was not a single-row INSERT")
    return int(key[0])
