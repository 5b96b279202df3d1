"""``context.link``: the game link as one plugin sees it (:class:`pageant.hookspecs.GameLink`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pageant.link.service import Link


class OwnerLink:
    """The host's link, its calls made as ``owner`` (made when first used, so a plugin's
    context costs nothing until it calls)."""

    def __init__(self, link: Callable[[], Link], owner: str) -> None:
        self._link = link
        self.owner = owner

    async def call(
        self,
        server: str,
        command: str,
        payload: Mapping[str, Any],
        *,
        key: str,
        deadline: datetime,
    ) -> Any:
        return await self._link().call(
            self.owner, server, command, payload, key=key, deadline=deadline
        )

    def servers(self) -> dict[str, str]:
        return {server: seen["state"] for server, seen in self._link().states(self.owner).items()}

    def up(self) -> list[str]:
        return sorted(server for server, state in self.servers().items() if state == "up")
