"""The gate tests' engine: over the plain test host."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def engine(host_engine: Any) -> Any:
    return host_engine
