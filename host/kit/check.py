"""The plugin kit: what ``pageant contract-check`` runs against a plugin in its author's CI.

It loads plugins through the same pipeline as ``serve`` (a refusal is reported with the
loader's own reason), starts them, then exercises what each checked plugin declared
(:mod:`pageant.kit.exercise`):

* each action's example params through ``perform`` with ``verify=True`` (every example, and
  the required ones alone when some are optional), classified as the host classifies;
* ``cost`` of the same params: a mapping naming only declared budget dimensions, with
  non-negative finite amounts;
* ``revert`` present exactly when ``reversible`` is not ``none``;
* each option source the plugin declares resolves, and each param's example is among the
  values of the source it names (a warning: the values are live data);
* each trigger's variable examples pass the emit path's payload check;

and compares the plugin's catalog with the committed manifest (:mod:`pageant.kit.manifest`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pageant.errors import Invalid
from pageant.hookspecs import CONTRACT_VERSION, GameLink
from pageant.kit import manifest as manifests
from pageant.kit.exercise import Check, KitServices, exercise, perform_again, start
from pageant.plugins.loader import DEFAULT_PLUGINS, PluginManager, PluginRecord, load_plugins
from pageant.plugins.registry import Registry
from pageant.support.settings import Settings

__all__ = ["Check", "Report", "UnknownPlugin", "contract_check", "render", "select"]

DEFAULT_MANIFEST = Path("contract-manifest.json")


@dataclass
class Report:
    """Every check of one ``contract-check``, and the records of the plugins it checked."""

    records: list[PluginRecord]
    checks: list[Check] = field(default_factory=list)
    #: The manifest was read and differs from what the plugins declare now.
    manifest_differs: bool = False
    #: The entry-point names checked: every hint names them with ``--plugin``.
    plugin_names: list[str] = field(default_factory=list)

    def hint_flags(self) -> str:
        """``--plugin NAME`` for each plugin checked, as the hints print it."""
        return " ".join(f"--plugin {name}" for name in self.plugin_names)

    @property
    def violations(self) -> list[Check]:
        return [c for c in self.checks if c.outcome == "violation"]

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.outcome == "warning"]

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` rendering: ``{plugins, checks, violations, warnings, ok}``; each
        plugin carries its own checks, and ``checks`` is every check with its outcome."""
        plugins = []
        for record in self.records:
            item = record.as_dict()
            item["checks"] = [
                {k: v for k, v in c.as_dict().items() if k != "plugin"}
                for c in self.checks
                if c.plugin == record.label
            ]
            plugins.append(item)
        return {
            "plugins": plugins,
            "checks": [c.as_dict() for c in self.checks],
            "violations": [c.as_dict() for c in self.violations],
            "warnings": [c.as_dict() for c in self.warnings],
            "ok": self.ok,
        }


class UnknownPlugin(Invalid):
    """A ``--plugin`` name that no installed plugin answers to (a usage error)."""


# ── choosing the plugins ─────────────────────────────────────────────────────


def is_builtin(record: PluginRecord) -> bool:
    """The host's own plugins (``core``), which a plugin's CI has no reason to check."""
    return record.distribution == "pageant" and (record.name, record.entry_point) in DEFAULT_PLUGINS


def _normal(name: str) -> str:
    # Distribution names compare as pip compares them: pageant_wisps is pageant-wisps.
    return re.sub(r"[-_.]+", "-", name).lower()


def select(records: Sequence[PluginRecord], names: Sequence[str]) -> list[PluginRecord]:
    """The records ``names`` choose (entry-point or distribution names); all non-built-ins
    when ``names`` is empty. Raises :class:`UnknownPlugin` naming what is installed."""
    if not names:
        chosen = [r for r in records if not is_builtin(r)]
        if not chosen:
            raise UnknownPlugin(
                "no plugin is installed besides the host's own; install yours "
                "(pip install -e .) or name one with --plugin"
            )
        return chosen
    chosen, unknown = [], []
    for name in names:
        matches = [r for r in records if name == r.name or _normal(name) == _normal(r.distribution)]
        if not matches:
            unknown.append(name)
        chosen.extend(m for m in matches if m not in chosen)
    if unknown:
        known = sorted({r.name for r in records} | {r.distribution for r in records})
        raise UnknownPlugin(
            f"no installed plugin is named {', '.join(map(repr, unknown))}; "
            f"expected an entry-point or distribution name: {', '.join(known)}"
        )
    return chosen


# ── the whole check ──────────────────────────────────────────────────────────


async def contract_check(
    names: Sequence[str] = (),
    *,
    manifest: Path = DEFAULT_MANIFEST,
    write: bool = False,
    settings: Settings | None = None,
    manager: PluginManager | None = None,
    fresh: PluginManager | None = None,
    resolve_seconds: float | None = None,
    live_link: bool = False,
) -> Report:
    """Load, select, exercise and compare; ``write`` regenerates the manifest instead.

    ``manager`` is a plugin manager already loaded (tests, embedding); by default the
    installed plugins are loaded exactly as ``serve`` loads them. Every example's dry run
    is repeated on ``fresh``, a second host loaded afresh (by default loaded here too).
    ``write`` without ``names`` refuses (:class:`UnknownPlugin`) when more than one plugin
    besides the host's own is installed: the manifest is one plugin's, not the machine's.

    ``live_link`` lends each plugin the real game link of the host whose database is
    ``settings.database_url`` (a ``pageant serve`` a test world's agents sync with): its
    commands are rows there, handed to those agents and answered by them, as under
    ``serve``. Without it, ``context.link`` is a :class:`KitLink` answering every command
    ``{"ok": True}`` at once.
    """
    settings = settings or Settings()
    if not live_link:
        return await _contract_check(
            names, manifest, write, settings, manager, fresh, resolve_seconds, None
        )
    from pageant.db.engine import create_engine
    from pageant.link.plugin import OwnerLink
    from pageant.link.service import Link
    from pageant.support.clock import SystemClock

    engine = create_engine(settings.database_url)
    link = Link(engine, SystemClock(), settings)
    try:
        return await _contract_check(
            names,
            manifest,
            write,
            settings,
            manager,
            fresh,
            resolve_seconds,
            lambda owner: OwnerLink(lambda: link, owner),
        )
    finally:
        await link.close()
        await engine.dispose()


async def _contract_check(
    names: Sequence[str],
    manifest: Path,
    write: bool,
    settings: Settings,
    manager: PluginManager | None,
    fresh: PluginManager | None,
    resolve_seconds: float | None,
    link: Callable[[str], GameLink] | None,
) -> Report:
    manager = manager or load_plugins(settings=settings)
    if write and not names:
        others = [r.label for r in manager.records if not is_builtin(r)]
        if len(others) > 1:
            raise UnknownPlugin(
                f"--write without --plugin would record {len(others)} plugins "
                f"({', '.join(others)}) in one manifest, and your plugin's CI would then "
                "fail on the others; name yours: pageant contract-check --plugin NAME --write"
            )
    records = select(manager.records, names)
    report = Report(records, plugin_names=[r.name for r in records])
    failed_startup = start(manager, link)
    services = KitServices(manager.registry, settings or Settings())
    loaded = []
    for record in records:
        if record.status != "loaded":
            which = "startup" if record.label in failed_startup else "load"
            report.checks.append(
                Check(record.label, which, record.label, "violation", record.reason or "refused")
            )
            continue
        loaded.append(record)
        report.checks.append(
            Check(
                record.label,
                "load",
                record.label,
                "pass",
                f"loaded; contract range {record.contract} admits {CONTRACT_VERSION}",
            )
        )
        report.checks.extend(
            await exercise(manager.registry, record, services, resolve_seconds=resolve_seconds)
        )
    if loaded:
        fresh = fresh or load_plugins(settings=settings)
        start(fresh, link)
        again = {r.label: r for r in fresh.loaded()}
        fresh_services = KitServices(fresh.registry, settings or Settings())
        for record in loaded:
            if record.label in again:
                checks = await perform_again(fresh.registry, again[record.label], fresh_services)
                report.checks.extend(checks)
    # Each start of the plugins is closed in the loop it ran in, before that loop ends.
    grace = (settings or Settings()).stop_grace_seconds
    await manager.shutdown(grace)
    if fresh is not None:
        await fresh.shutdown(grace)
    compared, report.manifest_differs = _manifest_checks(
        manager.registry, records, manifest, write, hint=report.hint_flags()
    )
    report.checks.extend(compared)
    return report


# ── the manifest ─────────────────────────────────────────────────────────────


def _manifest_checks(
    registry: Registry, records: Iterable[PluginRecord], path: Path, write: bool, *, hint: str
) -> tuple[list[Check], bool]:
    """The manifest's checks (or its writing), and whether it was read and differs."""
    records = list(records)
    loaded = [r for r in records if r.status == "loaded"]
    where = str(path)
    if write:
        refused = [r.label for r in records if r.status != "loaded"]
        if refused:
            # A manifest without the refused plugin would record its removal as intended.
            why = f"{', '.join(refused)} did not load; expected every plugin checked to load"
            return [
                Check(None, "manifest", where, "violation", f"{where} not written: {why}")
            ], False
        manifests.write(path, manifests.build(registry, loaded))
        return [
            Check(r.label, "manifest", where, "pass", f"written to {where}") for r in loaded
        ], False
    try:
        recorded = manifests.read(path)
    except FileNotFoundError:
        missing = (
            f"{where} does not exist; run `pageant contract-check {hint} --write` "
            "to record the contract, and commit the file"
        )
        return [Check(r.label, "manifest", where, "violation", missing) for r in loaded], False
    except (OSError, manifests.ManifestError) as exc:
        unreadable = (
            f"{where} {exc}; expected a manifest written by `pageant contract-check {hint} --write`"
        )
        return [Check(None, "manifest", where, "violation", unreadable)], False
    checks: list[Check] = []
    for record in loaded:
        entry = recorded.get(record.label)
        if entry is None:
            added = f"added plugin {record.label}: {where} does not record it"
            checks.append(Check(record.label, "manifest", record.label, "violation", added))
            continue
        differences = manifests.compare(entry, manifests.plugin_entry(registry, record))
        for d in differences:
            message = f"{d.describe()} (against {where})"
            checks.append(Check(record.label, "manifest", "/".join(d.path), "violation", message))
        if not differences:
            checks.append(Check(record.label, "manifest", where, "pass", f"matches {where}"))
    checked = {r.label for r in records}
    for label in sorted(set(recorded) - checked):
        removed = (
            f"removed plugin {label}: {where} records it, but it is not installed or not selected"
        )
        checks.append(Check(None, "manifest", label, "violation", removed))
    return checks, any(c.outcome == "violation" for c in checks)


# ── rendering ────────────────────────────────────────────────────────────────


def render(report: Report) -> str:
    """The human rendering: a heading per plugin, one line per check, a summary line."""
    lines: list[str] = []
    for record in report.records:
        lines.append(
            f"{record.label} {record.version}  owner={record.owner} contract={record.contract}"
        )
        lines.extend(_line(c) for c in report.checks if c.plugin == record.label)
    loose = [c for c in report.checks if c.plugin is None]
    if loose:
        lines.append("manifest")
        lines.extend(_line(c) for c in loose)
    if report.manifest_differs:
        lines.append(
            "if the contract change is intended, run "
            f"`pageant contract-check {report.hint_flags()} --write` and commit the manifest"
        )
    verdict = "passed" if report.ok else "FAILED"
    count = len(report.records)
    lines.append(
        f"contract-check {verdict}: {count} plugin{'s' if count != 1 else ''}, "
        f"{len(report.checks)} checks, {len(report.violations)} violation(s), "
        f"{len(report.warnings)} warning(s)"
    )
    return "\n".join(lines)


def _line(check: Check) -> str:
    return f"  {check.outcome:<10} {check.check:<15} {check.message}"
