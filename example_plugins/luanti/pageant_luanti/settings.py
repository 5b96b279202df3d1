"""The plugin's settings: ``[plugins.luanti]`` in the settings file, or
``PAGEANT_PLUGIN_LUANTI_<NAME>`` in the environment.

The fields are the game link's own (:class:`pageant.link.toolkit.LinkSettings`): ``servers``
names the worlds (each a server id of the game link, one mod each); ``places`` names spots in
them where entities appear and rewards are given: a table per place in the settings file
(``[[plugins.luanti.places]]`` with ``id``, ``x``, ``y``, ``z`` and, for a second world,
``server``), or ``altar=0,9,0;gate=12,9,-4@world_b`` in the environment; ``settings`` is what
``luanti.setting`` may lease, of the two the bridge can.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from pageant.link.toolkit import LinkSettings, Place

__all__ = ["LEASABLE", "LuantiSettings", "Place"]

#: The live settings the bridge may lease.
LEASABLE = ("time_speed", "gravity")


class LuantiSettings(LinkSettings):
    """The worlds the plugin drives and the places in them."""

    LEASABLE: ClassVar[tuple[str, ...]] = LEASABLE

    settings: list[str] = Field(
        default_factory=lambda: list(LEASABLE),
        description="The settings luanti.setting may lease (of time_speed, gravity).",
    )
