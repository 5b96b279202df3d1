"""The pluggy markers. Plugin authors use ``from pageant import hookimpl``."""

from __future__ import annotations

import pluggy

PROJECT_NAME = "pageant"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
