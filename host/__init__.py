"""pageant: a plugin host that runs scheduled, multi-phase world events for game servers.

``import pageant`` stays light: it brings pluggy and pydantic (the contract), never aiohttp
or SQLAlchemy. The host itself lives in submodules that are imported when used.
"""

from __future__ import annotations

from pageant.hookspecs import CONTRACT_VERSION, hookimpl, hookspec

__all__ = ["CONTRACT_VERSION", "__version__", "hookimpl", "hookspec"]


def __getattr__(name: str) -> str:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("pageant")
        except PackageNotFoundError:  # running from a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module 'pageant' has no attribute {name!r}")
