"""``may_invoke``: whether a claimed step's action may run now, decided at dispatch.

Called after the step is claimed and before anything reaches the plugin, so a refusal
means nothing was sent. The answer is ``(allowed, code, reason)``; a refusal is recorded
as the step's status ``refused`` (log kind ``step.refused``, with the code) and takes the
step's ``on_failure`` disposition like any terminal failure.

Until the switchboard exists, every ``change`` and ``irreversible`` action is disabled
(code ``disabled``). The caps issue extends this one function with enablement and caps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pageant.hookspecs import Action
    from pageant.hosting import Host

#: Risks that are off unless an admin turns them on in the switchboard.
DEFAULT_OFF = ("change", "irreversible")


async def may_invoke(
    host: Host, step: Mapping[str, Any], action: Action | None
) -> tuple[bool, str | None, str | None]:
    """Answer ``(allowed, code, reason)`` for dispatching ``step`` with ``action``.

    ``action`` is None when no loaded plugin registers the step's action any more (code
    ``unavailable``).
    """
    if action is None:
        return (
            False,
            "unavailable",
            f"no loaded plugin registers the action {step['action']!r}",
        )
    if action.risk in DEFAULT_OFF:
        return (
            False,
            "disabled",
            f"{action.id} is a {action.risk} action, and {action.risk} actions are disabled "
            "until the switchboard enables them",
        )
    return True, None, None
