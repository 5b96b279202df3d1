"""A plugin whose import fails: it needs a library that is not installed."""

from __future__ import annotations

import pageant_missing_dependency  # noqa: F401 - the failure is the point

PLUGIN_INFO = {"owner": "brokenplug", "contract": "^1.0"}
