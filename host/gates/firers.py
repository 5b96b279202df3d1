"""Who may fire a trigger: the rule every firing path asks before the emit path counts it.

A trigger's owner is the first segment of its id (``wisps.caught`` belongs to ``wisps``).
Core's triggers (``core.run.completed``, ``core.phase.entered``, ...) say what the host did;
a gate waiting on one trusts that the run it names really moved. So they are fired by the
host alone: a token through the API (a game server's or an admin's) is refused them, and a
plugin's ``context.emit`` may fire only the triggers of its own owner - a game reports what
happened in its own game, never another plugin's.
"""

from __future__ import annotations

from pageant.errors import Forbidden

#: The owner of the host's own triggers (the built-in ``core`` plugin's).
HOST_OWNER = "core"


def owner_of(trigger_id: str) -> str:
    """The owner a trigger id belongs to: its first segment."""
    return trigger_id.partition(".")[0]


def check_outside_firing(trigger_id: str) -> None:
    """Refuse, with :class:`Forbidden`, a firing from outside the host (an API token, the
    CLI) of a trigger the host alone fires."""
    if owner_of(trigger_id) == HOST_OWNER:
        raise Forbidden(
            f"{trigger_id} is one of pageant's own lifecycle triggers: the host fires it "
            "when a run moves, and no token may fire it"
        )


def check_plugin_firing(trigger_id: str, plugin_owner: str) -> None:
    """Refuse, with :class:`Forbidden`, a plugin's ``context.emit`` of a trigger another
    owner declares: a plugin fires only its own owner's triggers."""
    owner = owner_of(trigger_id)
    if owner != plugin_owner:
        raise Forbidden(
            f"plugin {plugin_owner!r} may fire only its own triggers ({plugin_owner}.*); "
            f"{trigger_id} belongs to {owner!r}"
        )


def check_token_firing(trigger_id: str, owners: tuple[str, ...] | None) -> None:
    """Refuse, with :class:`Forbidden`, a token's firing of a trigger outside the owners it
    is bound to (``owners``; None: an unbound token, which fires any owner's triggers), and
    of the host's own triggers (:func:`check_outside_firing`)."""
    check_outside_firing(trigger_id)
    if owners is not None and owner_of(trigger_id) not in owners:
        bound = ", ".join(owners) or "none"
        raise Forbidden(
            f"this token may fire only the triggers of {bound}; {trigger_id} belongs to "
            f"{owner_of(trigger_id)!r}"
        )
