"""What the loaded plugins registered: the one place the host looks declarations up."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from pageant.hookspecs import (
    Action,
    AnnounceLeg,
    Budget,
    Lease,
    OptionSource,
    Reading,
    Trigger,
)

#: (hook name, model, the attribute holding the id, the catalog key).
KINDS: tuple[tuple[str, type[BaseModel], str, str], ...] = (
    ("pageant_actions", Action, "id", "actions"),
    ("pageant_budgets", Budget, "dimension", "budgets"),
    ("pageant_leases", Lease, "id", "leases"),
    ("pageant_option_sources", OptionSource, "id", "option_sources"),
    ("pageant_triggers", Trigger, "id", "triggers"),
    ("pageant_announce_legs", AnnounceLeg, "id", "legs"),
    ("pageant_readings", Reading, "id", "readings"),
)

_CALLABLES = frozenset(
    {"perform", "revert", "cost", "read", "apply", "restore", "resolve", "send", "preview"}
)


@dataclass
class Registry:
    """Declarations by kind, each keyed by id, each remembering the plugin that owns it."""

    actions: dict[str, Action] = field(default_factory=dict)
    budgets: dict[str, Budget] = field(default_factory=dict)
    leases: dict[str, Lease] = field(default_factory=dict)
    option_sources: dict[str, OptionSource] = field(default_factory=dict)
    triggers: dict[str, Trigger] = field(default_factory=dict)
    legs: dict[str, AnnounceLeg] = field(default_factory=dict)
    readings: dict[str, Reading] = field(default_factory=dict)
    #: (catalog key, id) -> the plugin label (``dist[entry]``) that declared it.
    owners: dict[tuple[str, str], str] = field(default_factory=dict)
    #: (lease id, target) -> why the boot-time self-check dropped it (see
    #: :mod:`pageant.plugins.lease_check`).
    dropped_targets: dict[tuple[str, str], str] = field(default_factory=dict)

    def lease_target_refusal(self, lease_id: str, target: str) -> str | None:
        """Why ``target`` of the lease ``lease_id`` is not offered, or None when it is: it
        was dropped at boot, or the lease names the targets it offers and not this one."""
        dropped = self.dropped_targets.get((lease_id, target))
        if dropped is not None:
            return f"{lease_id} does not offer {target!r}: dropped at start, {dropped}"
        lease = self.leases.get(lease_id)
        if lease is not None and lease.self_check and target not in lease.self_check:
            offered = ", ".join(sorted(lease.self_check))
            return f"{lease_id} does not offer {target!r}; it offers {offered}"
        return None

    def table(self, key: str) -> dict[str, Any]:
        return getattr(self, key)

    def add(self, key: str, ident: str, declaration: Any, plugin: str) -> None:
        self.table(key)[ident] = declaration
        self.owners[(key, ident)] = plugin

    def withdraw(self, plugin: str) -> None:
        """Remove everything ``plugin`` declared (a plugin refused after loading)."""
        for (key, ident), owner in list(self.owners.items()):
            if owner == plugin:
                del self.table(key)[ident]
                del self.owners[(key, ident)]

    def owner_of(self, key: str, ident: str) -> str | None:
        return self.owners.get((key, ident))

    def catalog(self) -> dict[str, list[dict[str, Any]]]:
        """Every declaration as JSON-ready data, sorted by id, without its callables."""
        out: dict[str, list[dict[str, Any]]] = {}
        for _hook, _model, _id_attr, key in KINDS:
            items = []
            for ident in sorted(self.table(key)):
                declaration = self.table(key)[ident]
                data = declaration.model_dump(mode="json", exclude=_CALLABLES)
                if key == "actions":
                    data["has_cost"] = declaration.cost is not None
                    data["has_revert"] = declaration.revert is not None
                    data["default_on_failure"] = declaration.default_on_failure
                if key == "leases" and declaration.self_check:
                    data["dropped"] = [
                        {"target": target, "reason": self.dropped_targets[(ident, target)]}
                        for target in declaration.self_check
                        if (ident, target) in self.dropped_targets
                    ]
                data["plugin"] = self.owners[(key, ident)]
                items.append(data)
            out[key] = items
        return out
