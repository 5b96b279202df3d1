"""The engine: the tick, its stages, and the dispatch of steps.

``Engine(host)`` is started by ``pageant serve`` (through the app's cleanup context) and
stopped with it. See :mod:`pageant.engine.loop` for the loop and :mod:`pageant.engine.tick`
for the tick's stages, in order.
"""

from __future__ import annotations

from pageant.engine.loop import Engine

__all__ = ["Engine"]
