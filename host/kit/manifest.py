"""The contract manifest: a plugin's declarations as committed JSON, and how it changed.

A plugin's CI commits the manifest ``pageant contract-check --write`` produced; every later
check compares what the plugin declares now with it, so a contract change nobody meant
(a renamed param, a bumped budget, a dropped action) fails CI instead of reaching the
events that use it. The manifest is the catalog's own rendering (``Registry.catalog()``),
filtered to one plugin's ids, so it cannot disagree with what staff see.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pageant.errors import Invalid
from pageant.plugins.loader import PluginRecord
from pageant.plugins.registry import KINDS, Registry

#: Bumped when the file's shape changes, so an old file is named rather than misread.
FORMAT = 1

#: Lists compared by what names each item, so a reorder is no difference and a change
#: reads as "actions/wisps.summon/budget_ms" rather than as "actions[0]".
_ITEM_KEYS: dict[str, str] = {
    "plugins": "plugin",
    **{key: id_attr for _hook, _model, id_attr, key in KINDS},
    "params": "name",
    "variables": "name",
}


class ManifestError(Invalid):
    """The manifest file cannot be read as a manifest."""


@dataclass(frozen=True)
class Difference:
    """One way the plugin's declarations differ from the manifest."""

    kind: str  # added | removed | changed
    path: tuple[str, ...]
    recorded: Any = None
    current: Any = None

    def describe(self) -> str:
        where = "/".join(self.path)
        if self.kind == "changed":
            return f"changed {where}: {_show(self.recorded)} -> {_show(self.current)}"
        return f"{self.kind} {where}"


#: What the catalog shows that is not the plugin's contract: who declared it, what the host
#: derives from it (an action's effective ``default_on_failure``), and what a boot found
#: (the lease targets its self-check ``dropped``).
NOT_CONTRACT = frozenset({"plugin", "default_on_failure", "dropped"})
#: Optional fields of contract 1.2, recorded only when declared: a manifest written before
#: them still matches a plugin that does not use them.
SINCE_1_2 = frozenset({"on_failure", "self_check"})
#: A param's bounds, contract 1.3: recorded only when declared, for the same reason.
PARAM_BOUNDS = frozenset({"minimum", "maximum", "min_length", "max_length", "pattern", "enum"})
#: The same for contract 1.3: a trigger's ``sentence``.
SINCE_1_3 = frozenset({"sentence"})
#: Kinds of contract 1.5, recorded only when the plugin declares one (its readings): a
#: manifest written before them still matches a plugin that has none.
SINCE_1_5 = frozenset({"readings"})


def plugin_entry(registry: Registry, record: PluginRecord) -> dict[str, Any]:
    """One loaded plugin's part of the manifest: owner, range and everything it declared."""
    catalog = registry.catalog()
    entry: dict[str, Any] = {
        "plugin": record.label,
        "owner": record.owner,
        "contract": record.contract,
    }
    for key, items in catalog.items():
        if key in SINCE_1_5 and not any(item["plugin"] == record.label for item in items):
            continue
        entry[key] = [
            {
                k: _declared_params(v) if k == "params" else v
                for k, v in item.items()
                if k not in NOT_CONTRACT and not (k in SINCE_1_2 | SINCE_1_3 and v is None)
            }
            for item in items
            if item["plugin"] == record.label
        ]
    model = getattr(record.info, "settings", None)
    if model is not None:
        # Only when declared: a manifest written before settings existed still matches.
        entry["settings"] = settings_fields(model)
    # Through JSON and back, so what is compared is exactly what a file would hold.
    return json.loads(json.dumps(entry))


def _declared_params(params: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An action's params as the manifest records them: each bound only when declared."""
    return [
        {k: v for k, v in param.items() if not (k in PARAM_BOUNDS and v is None)}
        for param in params
    ]


def settings_fields(model: Any) -> list[dict[str, Any]]:
    """A settings model's fields as the manifest records them: name, JSON type, whether
    required and whether secret (never a value)."""
    from pydantic import SecretStr

    properties = model.model_json_schema().get("properties", {})
    out = []
    for name, info in model.model_fields.items():
        schema = properties.get(name, {})
        kind = schema.get("type") or " | ".join(
            sorted(str(s.get("type")) for s in schema.get("anyOf", []) if s.get("type"))
        )
        out.append(
            {
                "name": name,
                "type": kind or "any",
                "required": info.is_required(),
                "secret": info.annotation is SecretStr,
            }
        )
    return out


def build(registry: Registry, records: Iterable[PluginRecord]) -> dict[str, Any]:
    """The manifest of ``records`` (loaded plugins), sorted by plugin label."""
    entries = [plugin_entry(registry, r) for r in sorted(records, key=lambda r: r.label)]
    return {"format": FORMAT, "plugins": entries}


def dumps(manifest: Mapping[str, Any]) -> str:
    """Stable text: sorted keys, two-space indent, a trailing newline."""
    return json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write(path: Path, manifest: Mapping[str, Any]) -> None:
    """Write ``manifest`` to ``path`` (creating its folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(manifest), encoding="utf-8")


def read(path: Path) -> dict[str, dict[str, Any]]:
    """The recorded entries by plugin label; raises :class:`ManifestError` naming the problem.

    A missing file raises :class:`FileNotFoundError`, which callers answer differently.
    """
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"is not JSON ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("plugins"), list):
        raise ManifestError('has no "plugins" list')
    if data.get("format") != FORMAT:
        raise ManifestError(
            f"is in format {data.get('format')!r}; this pageant writes format {FORMAT}"
        )
    entries: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(data["plugins"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("plugin"), str):
            raise ManifestError(f'plugins[{i}] has no "plugin" label')
        entries[entry["plugin"]] = entry
    return entries


def compare(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[Difference]:
    """Every difference between a recorded entry and the current one, sorted by path."""
    return _differences(_keyed(recorded), _keyed(current), ())


def _keyed(value: Any, field: str | None = None) -> Any:
    if isinstance(value, Mapping):
        return {k: _keyed(v, k) for k, v in value.items()}
    key = _ITEM_KEYS.get(field or "")
    if (
        key is not None
        and isinstance(value, list)
        and all(isinstance(item, Mapping) and isinstance(item.get(key), str) for item in value)
    ):
        return {item[key]: _keyed({k: v for k, v in item.items() if k != key}) for item in value}
    return value


def _differences(recorded: Any, current: Any, path: tuple[str, ...]) -> list[Difference]:
    if isinstance(recorded, dict) and isinstance(current, dict):
        out: list[Difference] = []
        for key in sorted(set(recorded) | set(current)):
            here = (*path, key)
            if key not in current:
                out.append(Difference("removed", here, recorded=recorded[key]))
            elif key not in recorded:
                out.append(Difference("added", here, current=current[key]))
            else:
                out.extend(_differences(recorded[key], current[key], here))
        return out
    # Compared as JSON text: in Python 1 == 1.0 == True, in a contract they differ.
    if _show(recorded) != _show(current):
        return [Difference("changed", path, recorded=recorded, current=current)]
    return []


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
