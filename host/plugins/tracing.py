"""Where a plugin's exception came from: the line a plugin author opens first.

A plugin's failure is reported by the host, whose own frames (the dispatch, asyncio, pluggy)
sit around the plugin's. The frame worth naming is the innermost one in a plugin's own files
(``pageant_raffle/__init__.py:41 in draw``); failing that, the innermost one outside the
host and the standard library.
"""

from __future__ import annotations

import sys
import sysconfig
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pageant.hookspecs

_HOST_ROOTS = tuple(
    str(Path(p).resolve())
    for p in (
        Path(__file__).resolve().parent.parent,  # pageant (host/)
        Path(pageant.hookspecs.__file__).resolve().parent,
    )
)
_STDLIB_ROOTS = tuple(
    str(Path(p).resolve())
    for key in ("stdlib", "platstdlib")
    if (p := sysconfig.get_paths().get(key))
)


def plugin_root(obj: Any) -> Path | None:
    """The folder (or single file) a plugin object's code lives in."""
    module_name = (obj.__name__ if hasattr(obj, "__file__") else type(obj).__module__) or ""
    top_name = module_name.partition(".")[0]
    # The host's own plugins live inside the host's package: their folder, not the host's.
    top = sys.modules.get(module_name if top_name == "pageant" else top_name)
    filename = getattr(top, "__file__", None)
    if not filename:
        return None
    path = Path(filename).resolve()
    if top_name == "pageant":
        return path.parent
    return path.parent if path.name == "__init__.py" else path


def _short(filename: str, root: Path | None) -> str:
    path = Path(filename)
    if root is not None:
        try:
            return str(path.resolve().relative_to(root.parent))
        except ValueError:
            pass
    return path.name


def _within(filename: str, root: Path) -> bool:
    resolved = str(Path(filename).resolve())
    base = str(root)
    return resolved == base or resolved.startswith(base.rstrip("/") + "/")


def innermost_frame(exc: BaseException, roots: Iterable[Path | None] = ()) -> str | None:
    """``file.py:41 in draw`` for the innermost frame in ``roots`` (plugins' code), else the
    innermost frame outside the host and the standard library, else None."""
    frames = traceback.extract_tb(exc.__traceback__)
    known = [r for r in roots if r is not None]
    for frame in reversed(frames):
        for root in known:
            if _within(frame.filename, root):
                return f"{_short(frame.filename, root)}:{frame.lineno} in {frame.name}"
    for frame in reversed(frames):
        resolved = str(Path(frame.filename).resolve())
        if resolved.startswith(_HOST_ROOTS + _STDLIB_ROOTS) or frame.filename.startswith("<"):
            continue
        return f"{_short(frame.filename, None)}:{frame.lineno} in {frame.name}"
    return None


def innermost_owner(exc: BaseException, roots: Iterable[tuple[str, Path | None]]) -> str | None:
    """The label whose code holds the innermost frame of ``exc`` (``roots`` pairs each
    plugin's label with where its code lives), or None."""
    known = [(label, root) for label, root in roots if root is not None]
    # The most specific root first: a plugin inside another's folder is its own.
    known.sort(key=lambda pair: -len(str(pair[1])))
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        for label, root in known:
            if _within(frame.filename, root):
                return label
    return None


def last_frames(exc: BaseException, limit: int = 3) -> str:
    """The traceback's last ``limit`` frames and the exception, as Python prints them
    (the import machinery's own frames left out)."""
    shown = traceback.TracebackException.from_exception(exc)
    frames = [
        f
        for f in shown.stack
        if not f.filename.startswith("<frozen") and Path(f.filename).parent.name != "importlib"
    ]
    shown.stack = traceback.StackSummary.from_list(frames[-limit:])
    return "".join(shown.format()).rstrip()


#: The most of an exception's message the host keeps, in characters: a plugin's exception
#: is the host's sentence to store, so an enormous one is cut (and says so), never refused.
MAX_EXCEPTION_CHARS = 4_000


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, cut to :data:`MAX_EXCEPTION_CHARS` with a note of how much was left out."""
    text = str(exc)
    if len(text) <= MAX_EXCEPTION_CHARS:
        return text
    return f"{text[:MAX_EXCEPTION_CHARS]}... ({len(text) - MAX_EXCEPTION_CHARS:,} more characters)"


def describe_exception(exc: BaseException, roots: Iterable[Path | None] = ()) -> dict[str, Any]:
    """``{type, message, at}``: what a step's log line says about a plugin's exception."""
    return {
        "type": type(exc).__name__,
        "message": exception_text(exc),
        "at": innermost_frame(exc, roots),
    }
