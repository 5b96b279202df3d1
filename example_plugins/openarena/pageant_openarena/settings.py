"""The plugin's settings: ``[plugins.openarena]`` in the settings file, or
``PAGEANT_PLUGIN_OPENARENA_<NAME>`` in the environment.

One server needs ``rcon_password`` (and ``rcon_port``, ``log_path`` when not the defaults).
Several are a ``[[plugins.openarena.servers]]`` table each, with an ``id``; what a server
does not say it takes from the top-level settings.

Without a password the plugin still loads (so installing it beside other plugins refuses
nothing), but every action, lease and option source answers that ``rcon_password`` is not
set, naming where to set it.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

#: The cvars a lease may borrow unless the settings say otherwise.
DEFAULT_CVARS = ("g_gravity", "g_speed", "g_knockback", "g_quadfactor", "timelimit")
#: The id of the one server the top-level settings describe when there is no ``servers``.
DEFAULT_SERVER = "main"
#: A cvar name or value that can travel in an rcon command as one word.
WORD = re.compile(r"^[A-Za-z0-9_.+-]{1,64}\Z")


class ServerSettings(BaseModel):
    """One server of ``servers``."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="How events name the server.")
    rcon_host: str | None = Field(None, description="Its address (default: rcon_host).")
    rcon_port: int | None = Field(None, ge=1, le=65535, description="Its port.")
    rcon_password: SecretStr | None = Field(None, description="Its rconpassword.")
    log_path: str | None = Field(None, description="Its game log (g_log).")
    rcon_burst: int | None = Field(
        None, ge=1, le=100, description="Its rcon burst (default: rcon_burst)."
    )
    rcon_per_second: float | None = Field(
        None, gt=0, le=100, description="Its rcon requests a second (default: rcon_per_second)."
    )


class OpenArenaSettings(BaseModel):
    """What the plugin needs to reach its servers."""

    rcon_host: str = Field("127.0.0.1", description="The server's address.")
    rcon_port: int = Field(27960, ge=1, le=65535, description="The server's UDP port.")
    rcon_password: SecretStr | None = Field(
        None, description="The server's rconpassword: without it the plugin does nothing."
    )
    log_path: str | None = Field(
        None, description="The server's game log (g_log, with g_logsync 1); no triggers without."
    )
    servers: list[ServerSettings] = Field(
        default_factory=list, description="Several servers, each with an id (default: one)."
    )
    cvars: list[str] = Field(
        default_factory=lambda: list(DEFAULT_CVARS),
        description="The cvars openarena.cvar may lease (comma-separated in the environment).",
    )
    rcon_timeout_seconds: float = Field(
        2.0, gt=0, le=30, description="How long an rcon request waits for its answer."
    )
    rcon_retries: int = Field(2, ge=0, le=5, description="How often a read is asked again.")
    rcon_burst: int = Field(
        10,
        ge=1,
        le=100,
        description="Rcon requests sent at once before pacing (ioquake3 answers ten).",
    )
    rcon_per_second: float = Field(
        1.0,
        gt=0,
        le=100,
        description="Rcon requests a second after the burst (ioquake3 answers one).",
    )
    probe_seconds: float = Field(
        5.0, gt=0, le=300, description="How often the plugin checks each server answers."
    )
    log_poll_seconds: float = Field(0.5, gt=0, le=60, description="How often logs are read.")
    state_dir: str | None = Field(
        None,
        description="Where the log offsets and reverted keys are kept (default: beside each log).",
    )

    @field_validator("cvars", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("cvars")
    @classmethod
    def _cvar_names(cls, value: list[str]) -> list[str]:
        bad = [name for name in value if not WORD.match(name)]
        if bad:
            raise ValueError(f"not a cvar name: {', '.join(map(repr, bad))}")
        return value

    @model_validator(mode="after")
    def _unique_ids(self) -> OpenArenaSettings:
        ids = [server.id for server in self.servers]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"servers: id(s) given twice: {', '.join(twice)}")
        return self

    def unset_password(self) -> str | None:
        """Why the servers cannot be reached (a password is missing), or None."""
        missing = [s.id for s in self.resolved() if s.rcon_password is None]
        if not missing:
            return None
        return (
            f"rcon_password is not set for {', '.join(missing)}: set "
            "PAGEANT_PLUGIN_OPENARENA_RCON_PASSWORD, or rcon_password in [plugins.openarena] "
            "(or in the server's [[plugins.openarena.servers]] table) of the settings file"
        )

    def resolved(self) -> list[ServerSettings]:
        """Every server, each with its fields filled from the top level where it is silent."""
        if not self.servers:
            return [
                ServerSettings(
                    id=DEFAULT_SERVER,
                    rcon_host=self.rcon_host,
                    rcon_port=self.rcon_port,
                    rcon_password=self.rcon_password,
                    log_path=self.log_path,
                    rcon_burst=self.rcon_burst,
                    rcon_per_second=self.rcon_per_second,
                )
            ]
        return [
            server.model_copy(
                update={
                    "rcon_host": server.rcon_host or self.rcon_host,
                    "rcon_port": server.rcon_port or self.rcon_port,
                    "rcon_password": server.rcon_password or self.rcon_password,
                    "rcon_burst": server.rcon_burst or self.rcon_burst,
                    "rcon_per_second": server.rcon_per_second or self.rcon_per_second,
                }
            )
            for server in self.servers
        ]
