"""What the host warns an operator about a loaded plugin, beyond loaded or refused.

One function answers each question and every surface renders its answer: ``pageant
plugins``, ``serve``'s start, the console's plugins page and ``GET /api/v1/admin/plugins``
(through :func:`pageant.plugins.loader.plugin_listing`), and the cleanup stage, which will
not call a world clean on the strength of a promise the plugin never made.
"""

from __future__ import annotations

from typing import Protocol

from pageant.hookspecs.models import changes_world
from pageant.plugins.ranges import BadRange, parse_range
from pageant.plugins.registry import Registry


class PluginRecord(Protocol):
    """What a warning reads of a plugin's record (:class:`pageant.plugins.loader.PluginRecord`)."""

    @property
    def label(self) -> str: ...
    @property
    def distribution(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def contract(self) -> str | None: ...


#: The contract version that made a revert final for its key: after it answers ok, nothing
#: made under the key is, or will be, in the world.
REVERT_IS_FINAL = "1.2.0"


def _gives_back(record: PluginRecord, registry: Registry) -> bool:
    """Whether the plugin declares an action the ledger records and gives back (a
    ``change`` or ``irreversible`` action with a revert)."""
    for (kind, ident), label in registry.owners.items():
        if kind != "actions" or label != record.label:
            continue
        action = registry.actions.get(ident)
        if action is not None and changes_world(action.risk) and action.revert is not None:
            return True
    return False


def late_change_warning(record: PluginRecord, registry: Registry) -> str | None:
    """Why the host cannot call a world clean after reverting a step of ``record``'s plugin
    whose perform never answered, or None when it can.

    A revert is final for its key from contract 1.2: the plugin then refuses a change that
    arrives after it (a perform cut off by its budget that the game applies late). A plugin
    whose range admits an older contract (``^1.1``) never promised that, so such a revert
    leaves its run's cleanup ``incomplete`` with this sentence. Plugins that give nothing
    back, and refused ones, answer None.
    """
    if record.status != "loaded" or not record.contract:
        return None
    try:
        contract = parse_range(record.contract)
    except BadRange:  # a loaded plugin's range parsed once already
        return None
    if contract.requires(REVERT_IS_FINAL) or not _gives_back(record, registry):
        return None
    floor = contract.floor
    return (
        f"{record.distribution} is on contract {floor.major}.{floor.minor} and cannot promise "
        "that a late change is refused; check the world"
    )
