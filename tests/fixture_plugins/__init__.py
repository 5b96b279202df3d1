"""Fixture plugins, and fake installed distributions that carry them.

:func:`fake_site` makes a folder that looks like ``site-packages`` to
``importlib.metadata``: each :meth:`Site.install` writes ``<dist>-<version>.dist-info``
(``METADATA`` and ``entry_points.txt`` with group ``[pageant]``) and the plugin's module
files, so the host discovers the plugin through real entry points. The folder is put on
``sys.path`` for the test, and every module imported from it is forgotten afterwards.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def source(name: str) -> str:
    """A fixture plugin module's text (``tests/fixture_plugins/<name>.py``)."""
    return (HERE / f"{name}.py").read_text()


class Site:
    """A folder on ``sys.path`` holding fake installed distributions."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.modules: set[str] = set()

    def install(
        self,
        dist: str,
        entries: Mapping[str, str],
        modules: Mapping[str, str],
        *,
        version: str = "0.1",
    ) -> None:
        """Install ``dist`` with entry points ``{name: "module[:attr]"}`` and module sources."""
        info = self.root / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        lines = ["[pageant]", *(f"{name} = {value}" for name, value in entries.items())]
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        for module, text in modules.items():
            (self.root / f"{module}.py").write_text(text)
            self.modules.add(module)

    def forget_modules(self) -> None:
        for module in self.modules:
            sys.modules.pop(module, None)


@contextmanager
def fake_site(root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    """A :class:`Site` in ``root``, on ``sys.path`` until the block ends."""
    root.mkdir(parents=True, exist_ok=True)
    site = Site(root)
    monkeypatch.syspath_prepend(str(root))
    try:
        yield site
    finally:
        site.forget_modules()
