"""The plugin's settings: ``[plugins.luanti]`` in the settings file, or
``PAGEANT_PLUGIN_LUANTI_<NAME>`` in the environment.

``servers`` names the worlds (each a server id of the game link, one mod each); ``places``
names spots in them where entities appear and rewards are given: a table per place in the
settings file (``[[plugins.luanti.places]]`` with ``id``, ``x``, ``y``, ``z`` and, for a second
world, ``server``), or ``altar=0,9,0;gate=12,9,-4@world_b`` in the environment.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

#: ``name=x,y,z`` or ``name=x,y,z@server``: one place as the environment writes it.
PLACE = re.compile(r"^\s*([a-z][a-z0-9_-]*)\s*=\s*(-?\d+),(-?\d+),(-?\d+)(?:@(\S+))?\s*$")
#: The live settings the bridge may lease.
LEASABLE = ("time_speed", "gravity")


class Place(BaseModel):
    """A named spot in one world."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_-]*$", description="How events name the place.")
    server: str | None = Field(None, description="Its world (default: the first server).")
    x: int
    y: int
    z: int


class LuantiSettings(BaseModel):
    """The worlds the plugin drives and the places in them."""

    servers: list[str] = Field(
        default_factory=lambda: ["world"],
        description="The server ids of the worlds (comma-separated in the environment).",
    )
    places: list[Place] = Field(default_factory=list, description="Named spots in the worlds.")
    settings: list[str] = Field(
        default_factory=lambda: list(LEASABLE),
        description="The settings luanti.setting may lease (of time_speed, gravity).",
    )
    command_seconds: float = Field(
        20.0, gt=0, le=300, description="How long a lease's call waits for the world's answer."
    )

    @field_validator("servers", "settings", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("places", mode="before")
    @classmethod
    def _places(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        found = []
        for part in filter(str.strip, value.split(";")):
            match = PLACE.match(part)
            if match is None:
                raise ValueError(f"{part.strip()!r} is not name=x,y,z or name=x,y,z@server")
            name, x, y, z, server = match.groups()
            found.append({"id": name, "x": x, "y": y, "z": z, "server": server})
        return found

    @field_validator("settings")
    @classmethod
    def _leasable(cls, value: list[str]) -> list[str]:
        # contract-check walks a lease through a target of its own, which never reaches a world.
        bad = [name for name in value if name not in (*LEASABLE, "contract-check")]
        if bad:
            raise ValueError(f"not a setting the bridge can lease: {', '.join(bad)}")
        return value

    @model_validator(mode="after")
    def _known(self) -> LuantiSettings:
        for place in self.places:
            place.server = place.server or self.servers[0]
            if place.server not in self.servers:
                raise ValueError(f"place {place.id}: no server {place.server!r} in servers")
        ids = [place.id for place in self.places]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"places: id(s) given twice: {', '.join(twice)}")
        return self
