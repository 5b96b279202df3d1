"""What the built-in legs show of an announcement, whichever service they write to."""

from __future__ import annotations

from typing import Any

from pageant.hookspecs import Announcement, SendContext

NO_SERVICES = {"ok": False, "retry": False, "error": "no host services in this context"}


def announcement_of(message: str, ctx: SendContext) -> Announcement:
    """The announcement the host rendered for this send, or, where none stands behind the
    call (a plugin's own tests, the kit's stand-in), one made of the message alone."""
    if ctx.announcement is not None:
        return ctx.announcement
    title = f"Announcement: {ctx.run.slug}" if ctx.run is not None else "Announcement"
    return Announcement(title=title, body=message)


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, an ellipsis marking a cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def host_settings(ctx: SendContext) -> Any:
    """The host's own settings object: the built-in legs read settings (the SMTP relay, the
    chat webhooks) that the contract's ``HostSettings`` does not promise third parties."""
    assert ctx.services is not None
    return ctx.services.settings
