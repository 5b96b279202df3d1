"""Plugin loading: each refusal names the plugin and says what was expected, and the host
runs on with the others.

Reasons read ``dist[entry]: what is wrong; what was expected``. Plugins handed over as
objects are labelled ``inline[<name>]``; discovered ones carry their distribution's name.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from pageant import hookimpl
from pageant.hookspecs import CONTRACT_VERSION, PluginInfo
from pageant.hosting import Host
from pageant.plugins.loader import (
    PluginManager,
    PluginRecord,
    candidate_for,
    find_candidates,
    load_plugins,
    plugin_listing,
)
from pageant.support.settings import Settings
from tests.fixture_plugins import Site, fake_site, source


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    with fake_site(tmp_path / "site", monkeypatch) as s:
        yield s


def info(owner: str, contract: str = "^1.0") -> dict[str, str]:
    """A PLUGIN_INFO, in the plain-dict form most plugins use."""
    return {"owner": owner, "contract": contract}


async def perform(ctx: Any) -> dict[str, Any]:
    return {"ok": True}


def act(ident: str, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": ident,
        "label": ident,
        "risk": "notify",
        "budget_ms": 1_000,
        "perform": perform,
    }
    data.update(overrides)
    return data


class Good:
    """A plugin that loads: one action, one budget."""

    PLUGIN_INFO = info("good")

    @hookimpl
    def pageant_actions(self) -> list[Any]:
        return [act("good.act")]

    @hookimpl
    def pageant_budgets(self) -> list[Any]:
        return [{"dimension": "good.gold", "label": "Gold", "unit": "coins"}]


def declaring(owner: str, *actions: dict[str, Any], contract: str = "^1.0") -> Any:
    """A plugin object whose pageant_actions answers ``actions``."""

    class Declaring:
        PLUGIN_INFO = info(owner, contract)

        @hookimpl
        def pageant_actions(self) -> list[Any]:
            return list(actions)

    return Declaring()


def load(*plugins: tuple[str, Any]) -> PluginManager:
    """The built-ins, then ``plugins`` (name, object), then Good: all through one pipeline."""
    candidates = [candidate_for(obj, name) for name, obj in plugins]
    return load_plugins([*candidates, candidate_for(Good(), "good")], discover=False)


def record(manager: PluginManager, label: str) -> PluginRecord:
    return next(r for r in manager.records if r.label == label)


def refused(manager: PluginManager, label: str) -> str:
    """The reason ``label`` was refused, after checking the others loaded."""
    found = record(manager, label)
    assert found.status == "refused", f"{label} loaded"
    assert found.reason is not None and found.reason.startswith(f"{label}: ")
    # The host runs on: the built-ins and the good plugin are loaded, with what they declared.
    assert record(manager, "pageant[core]").status == "loaded"
    assert record(manager, "inline[good]").status == "loaded"
    assert manager.registry.owner_of("actions", "good.act") == "inline[good]"
    assert "core.announce" in manager.registry.actions
    # Nothing of a refused plugin stays registered.
    assert found.label not in manager.registry.owners.values()
    assert manager.pm.get_plugin(label) is None
    return found.reason


# ── the contract range ────────────────────────────────────────────────────────


def test_a_bad_range_is_refused() -> None:
    manager = load(("ranged", declaring("ranged", contract="1.x")))
    assert refused(manager, "inline[ranged]") == (
        "inline[ranged]: bad contract range '1.x': '1.x' is not understood; "
        "expected ^X.Y, ~X.Y or comparisons like >=1.2 <2"
    )


def test_an_unmet_range_is_refused() -> None:
    manager = load(("future", declaring("future", act("future.a"), contract="^2.0")))
    assert refused(manager, "inline[future]") == (
        f"inline[future]: needs contract ^2.0; this host implements {CONTRACT_VERSION}"
    )


def test_a_range_below_the_host_is_refused_too() -> None:
    manager = load(("past", declaring("past", contract="<1.0")))
    assert refused(manager, "inline[past]") == (
        f"inline[past]: needs contract <1.0; this host implements {CONTRACT_VERSION}"
    )


def test_the_range_is_checked_before_the_plugin_is_registered() -> None:
    calls: list[str] = []

    class Future:
        PLUGIN_INFO = info("future", "^9.0")

        @hookimpl
        def pageant_actions(self) -> list[Any]:
            calls.append("pageant_actions")
            return []

    load(("future", Future()))
    assert calls == []


# ── hooks ─────────────────────────────────────────────────────────────────────


def test_a_misspelt_hook_is_refused() -> None:
    class Misspelt:
        PLUGIN_INFO = info("misspelt")

        @hookimpl
        def pageant_actionz(self) -> list[Any]:
            return []

    manager = load(("misspelt", Misspelt()))
    assert refused(manager, "inline[misspelt]") == (
        "inline[misspelt]: pageant_actionz is not a pageant hook; expected pageant_actions"
    )


def test_a_hook_nothing_like_a_pageant_hook_is_refused() -> None:
    class Stray:
        PLUGIN_INFO = info("stray")

        @hookimpl
        def on_tuesday(self) -> None:
            pass

    manager = load(("stray", Stray()))
    assert refused(manager, "inline[stray]") == (
        "inline[stray]: on_tuesday is not a pageant hook; "
        "expected one of the hooks in pageant.hookspecs"
    )


def test_a_hook_without_its_marker_is_refused() -> None:
    # pluggy would ignore it silently, and the plugin would load declaring nothing.
    class Unmarked:
        PLUGIN_INFO = info("unmarked")

        def pageant_budgets(self) -> list[Any]:
            return [{"dimension": "unmarked.x", "label": "X", "unit": "u"}]

    manager = load(("unmarked", Unmarked()))
    assert refused(manager, "inline[unmarked]") == (
        "inline[unmarked]: pageant_budgets is not marked with @hookimpl; "
        "expected @pageant.hookimpl on every hook, or the host never calls it"
    )


def test_a_hook_taking_an_argument_the_host_does_not_pass_is_refused() -> None:
    class BadSignature:
        PLUGIN_INFO = info("badsig")

        @hookimpl
        def pageant_startup(self, ctx: Any) -> None:
            pass

    manager = load(("badsig", BadSignature()))
    assert refused(manager, "inline[badsig]") == (
        "inline[badsig]: pageant_startup takes ctx, which the host does not pass; "
        "expected pageant_startup(context)"
    )


def test_a_hook_may_take_fewer_arguments_than_the_host_passes() -> None:
    class Incurious:
        PLUGIN_INFO = info("incurious")

        @hookimpl
        def pageant_startup(self) -> None:
            pass

    manager = load(("incurious", Incurious()))
    assert record(manager, "inline[incurious]").status == "loaded"


def test_an_async_declaration_hook_is_refused() -> None:
    class AsyncDeclarations:
        PLUGIN_INFO = info("asyncdecl")

        @hookimpl
        async def pageant_budgets(self) -> list[Any]:
            return []

    manager = load(("asyncdecl", AsyncDeclarations()))
    assert refused(manager, "inline[asyncdecl]") == (
        "inline[asyncdecl]: pageant_budgets is async def; expected a plain function"
    )


def test_a_sync_reconcile_is_refused_and_an_async_one_accepted() -> None:
    class SyncReconcile:
        PLUGIN_INFO = info("syncrec")

        @hookimpl
        def pageant_reconcile(self, resources: list[Any]) -> list[Any]:
            return []

    class AsyncReconcile:
        PLUGIN_INFO = info("asyncrec")

        @hookimpl
        async def pageant_reconcile(self, resources: list[Any]) -> list[Any]:
            return []

    manager = load(("syncrec", SyncReconcile()), ("asyncrec", AsyncReconcile()))
    assert refused(manager, "inline[syncrec]") == (
        "inline[syncrec]: pageant_reconcile is a plain function; expected async def"
    )
    assert record(manager, "inline[asyncrec]").status == "loaded"


def test_a_hook_named_through_specname_is_checked_too() -> None:
    class Renamed:
        PLUGIN_INFO = info("renamed")

        @hookimpl(specname="pageant_budgets")
        async def declare(self) -> list[Any]:
            return []

    manager = load(("renamed", Renamed()))
    assert refused(manager, "inline[renamed]") == (
        "inline[renamed]: pageant_budgets is async def; expected a plain function"
    )


def test_every_hook_problem_is_named_at_once() -> None:
    class Muddled:
        PLUGIN_INFO = info("muddled")

        @hookimpl
        def pageant_actionz(self) -> list[Any]:
            return []

        @hookimpl
        async def pageant_triggers(self) -> list[Any]:
            return []

    reason = refused(load(("muddled", Muddled())), "inline[muddled]")
    assert reason == (
        "inline[muddled]: pageant_actionz is not a pageant hook; expected pageant_actions"
        " | pageant_triggers is async def; expected a plain function"
    )


def test_a_hook_that_raises_is_refused() -> None:
    class Raising:
        PLUGIN_INFO = info("raising")

        @hookimpl
        def pageant_triggers(self) -> list[Any]:
            raise RuntimeError("shard config missing")

    line = Raising.pageant_triggers.__code__.co_firstlineno + 2
    manager = load(("raising", Raising()))
    assert refused(manager, "inline[raising]") == (
        "inline[raising]: pageant_triggers() raised RuntimeError: shard config missing at "
        f"tests/plugins/test_plugin_loading.py:{line} in pageant_triggers; "
        "expected it to return a list"
    )


def test_a_hook_that_returns_something_other_than_a_list_is_refused() -> None:
    class Single:
        PLUGIN_INFO = info("single")

        @hookimpl
        def pageant_budgets(self) -> Any:
            return {"dimension": "single.x", "label": "X", "unit": "u"}

    manager = load(("single", Single()))
    assert refused(manager, "inline[single]") == (
        "inline[single]: pageant_budgets() returned dict; expected a list"
    )


def test_a_hook_may_return_none_or_a_tuple() -> None:
    class Quiet:
        PLUGIN_INFO = info("quiet")

        @hookimpl
        def pageant_actions(self) -> None:
            return None

        @hookimpl
        def pageant_budgets(self) -> tuple[Any, ...]:
            return ({"dimension": "quiet.x", "label": "X", "unit": "u"},)

    manager = load(("quiet", Quiet()))
    assert record(manager, "inline[quiet]").status == "loaded"
    assert manager.registry.owner_of("budgets", "quiet.x") == "inline[quiet]"


# ── declarations ──────────────────────────────────────────────────────────────


def test_an_invalid_declaration_is_refused_naming_where_and_what() -> None:
    manager = load(("invalid", declaring("invalid", act("invalid.act", budget_ms=600_001))))
    assert refused(manager, "inline[invalid]") == (
        "inline[invalid]: pageant_actions[0] (invalid.act) is invalid: "
        "budget_ms: Input should be less than or equal to 600000"
    )


def test_a_plugin_is_loaded_whole_or_not_at_all() -> None:
    manager = load(
        ("half", declaring("half", act("half.fine"), act("half.broken", risk="dangerous")))
    )
    reason = refused(manager, "inline[half]")
    assert reason.startswith("inline[half]: pageant_actions[1] (half.broken) is invalid: risk:")
    assert "half.fine" not in manager.registry.actions


def test_an_id_outside_the_plugins_namespace_is_refused() -> None:
    manager = load(("squatter", declaring("squatter", act("wisps.summon"))))
    assert refused(manager, "inline[squatter]") == (
        "inline[squatter]: pageant_actions[0] (wisps.summon): id 'wisps.summon' is outside "
        "the plugin's namespace; expected it to start with 'squatter.'"
    )


def test_an_owner_prefix_is_not_a_namespace() -> None:
    # "good" owns good.*, not goodness.*
    manager = load(("good2", declaring("good", act("goodness.act"))))
    assert "outside the plugin's namespace; expected it to start with 'good.'" in refused(
        manager, "inline[good2]"
    )


def test_a_duplicate_id_across_two_plugins_names_both_owners() -> None:
    # Two distributions may share an owner; they may not share an id.
    first = declaring("twin", act("twin.act"))
    second = declaring("twin", act("twin.act"))
    manager = load(("first", first), ("second", second))
    assert record(manager, "inline[first]").status == "loaded"
    assert refused(manager, "inline[second]") == (
        "inline[second]: pageant_actions[0] (twin.act): 'twin.act' is declared by both "
        "inline[first] and inline[second]; expected each id once"
    )
    assert manager.registry.owner_of("actions", "twin.act") == "inline[first]"


def test_a_duplicate_id_within_one_plugin_is_refused() -> None:
    manager = load(("echo", declaring("echo", act("echo.act"), act("echo.act"))))
    assert refused(manager, "inline[echo]") == (
        "inline[echo]: pageant_actions[1] (echo.act): 'echo.act' is declared by both "
        "inline[echo] and inline[echo]; expected each id once"
    )


def test_a_param_naming_an_undeclared_option_source_is_refused() -> None:
    param = {
        "name": "colour",
        "type": "string",
        "description": "Which.",
        "example": "red",
        "option_source": "paint.options.nope",
    }
    manager = load(("paint", declaring("paint", act("paint.act", params=[param]))))
    assert refused(manager, "inline[paint]") == (
        "inline[paint]: pageant_actions (paint.act): param 'colour' names option source "
        "'paint.options.nope', which nobody declares; expected a declared source"
    )


def test_a_param_may_name_an_option_source_already_loaded() -> None:
    param = {
        "name": "leg",
        "type": "string",
        "description": "Where.",
        "example": "core.log",
        "option_source": "core.options.legs",
    }
    manager = load(("shout", declaring("shout", act("shout.act", params=[param]))))
    assert record(manager, "inline[shout]").status == "loaded"


def test_every_declaration_problem_is_named_at_once() -> None:
    class Sloppy:
        PLUGIN_INFO = info("sloppy")

        @hookimpl
        def pageant_actions(self) -> list[Any]:
            return [act("sloppy.a", budget_ms=0)]

        @hookimpl
        def pageant_budgets(self) -> list[Any]:
            return [{"dimension": "other.gold", "label": "Gold", "unit": "coins"}]

    reason = refused(load(("sloppy", Sloppy())), "inline[sloppy]")
    parts = reason.removeprefix("inline[sloppy]: ").split(" | ")
    assert parts == [
        "pageant_actions[0] (sloppy.a) is invalid: budget_ms: "
        "Input should be greater than or equal to 1",
        "pageant_budgets[0] (other.gold): id 'other.gold' is outside the plugin's namespace; "
        "expected it to start with 'sloppy.'",
    ]


# ── PLUGIN_INFO and the plugin object ─────────────────────────────────────────


def test_a_plugin_without_plugin_info_is_refused() -> None:
    class Anonymous:
        @hookimpl
        def pageant_actions(self) -> list[Any]:
            return []

    manager = load(("anonymous", Anonymous()))
    assert refused(manager, "inline[anonymous]") == (
        'inline[anonymous]: has no PLUGIN_INFO; expected PLUGIN_INFO = {"owner": ..., '
        '"contract": ...}'
    )


def test_an_invalid_plugin_info_is_refused() -> None:
    class Vague:
        PLUGIN_INFO: ClassVar[dict[str, str]] = {"owner": "Vague Plugin"}  # and no contract

    reason = refused(load(("vague", Vague())), "inline[vague]")
    assert reason.startswith("inline[vague]: PLUGIN_INFO is invalid (")
    assert "owner: Value error, 'Vague Plugin' is not an owner" in reason
    assert "contract: Field required" in reason
    assert reason.endswith("; expected owner and contract")


def test_a_plugin_info_that_raises_when_read_is_refused() -> None:
    class Lazy:
        @property
        def PLUGIN_INFO(self) -> Any:
            raise RuntimeError("config file not found")

    assert refused(load(("lazy", Lazy())), "inline[lazy]") == (
        "inline[lazy]: raised RuntimeError: config file not found while loading; "
        "expected it to load without raising"
    )


def test_plugin_info_may_be_the_model() -> None:
    class Modelled:
        PLUGIN_INFO = PluginInfo(owner="modelled", contract="^1.0")

    manager = load(("modelled", Modelled()))
    assert record(manager, "inline[modelled]").owner == "modelled"


def test_a_third_party_plugin_claiming_core_is_refused() -> None:
    manager = load(("usurper", declaring("core", act("core.usurp"))))
    assert refused(manager, "inline[usurper]") == (
        'inline[usurper]: claims the owner "core"; expected an owner of its own'
    )
    assert "core.usurp" not in manager.registry.actions


def test_a_class_plugin_is_instantiated_with_no_arguments() -> None:
    class Instantiated:
        PLUGIN_INFO = info("inst")

        def __init__(self) -> None:
            self.built = True

        @hookimpl
        def pageant_actions(self) -> list[Any]:
            return [act("inst.act")]

    manager = load(("inst", Instantiated))
    loaded = record(manager, "inline[inst]")
    assert loaded.status == "loaded"
    assert isinstance(loaded.plugin, Instantiated) and loaded.plugin.built


def test_a_class_plugin_that_needs_arguments_is_refused() -> None:
    class NeedsConfig:
        PLUGIN_INFO = info("needy")

        def __init__(self, shard_url: str) -> None:
            self.shard_url = shard_url

    reason = refused(load(("needy", NeedsConfig)), "inline[needy]")
    assert reason.startswith("inline[needy]: cannot be instantiated (TypeError: ")
    assert "shard_url" in reason
    assert reason.endswith("; expected a class that takes no arguments")


def test_a_class_plugin_whose_constructor_raises_is_refused() -> None:
    class Fragile:
        PLUGIN_INFO = info("fragile")

        def __init__(self) -> None:
            raise OSError("no config file")

    assert refused(load(("fragile", Fragile)), "inline[fragile]") == (
        "inline[fragile]: cannot be instantiated (OSError: no config file); "
        "expected a class that takes no arguments"
    )


# ── startup ───────────────────────────────────────────────────────────────────


class StartsBadly:
    PLUGIN_INFO = info("badstart")

    @hookimpl
    def pageant_actions(self) -> list[Any]:
        return [act("badstart.act")]

    @hookimpl
    def pageant_startup(self, context: Any) -> None:
        raise RuntimeError("shard refused the handshake")


STARTUP_LINE = StartsBadly.pageant_startup.__code__.co_firstlineno + 2


class StartsWell:
    PLUGIN_INFO = info("goodstart")

    def __init__(self) -> None:
        self.context: Any = None

    @hookimpl
    def pageant_startup(self, context: Any) -> None:
        self.context = context


async def test_a_plugin_whose_startup_raises_is_withdrawn() -> None:
    bad, good = StartsBadly(), StartsWell()
    host = Host(
        Settings(),
        discover=False,
        plugins=[candidate_for(bad, "badstart"), candidate_for(good, "goodstart")],
    )
    try:
        assert "badstart.act" in host.registry.actions
        await host.start_plugins()
        withdrawn = record(host.plugins, "inline[badstart]")
        assert withdrawn.status == "refused"
        assert withdrawn.reason == (
            "inline[badstart]: pageant_startup raised RuntimeError: shard refused the "
            f"handshake at tests/plugins/test_plugin_loading.py:{STARTUP_LINE} in pageant_startup; "
            "expected it to return"
        )
        assert "badstart.act" not in host.registry.actions
        assert not host.plugins.pm.is_registered(bad)
        # The others started, each with a context of its own.
        assert good.context is not None and good.context.plugin == "inline[goodstart]"
        assert good.context.owner == "goodstart"
        assert record(host.plugins, "pageant[core]").plugin.context is not None
        assert [r.label for r in host.plugins.loaded()] == ["pageant[core]", "inline[goodstart]"]
    finally:
        await host.close()


# ── discovery through real entry points ───────────────────────────────────────


def test_a_broken_installed_plugin_is_refused_and_the_others_load(site: Site) -> None:
    site.install("brokenplug", {"brokenplug": "brokenplug"}, {"brokenplug": source("brokenplug")})
    manager = load_plugins()
    broken = record(manager, "brokenplug[brokenplug]")
    assert (broken.status, broken.version, broken.entry_point) == ("refused", "0.1", "brokenplug")
    assert broken.reason == (
        "brokenplug[brokenplug]: cannot be imported (ModuleNotFoundError: No module named "
        "'pageant_missing_dependency' at brokenplug.py:5 in <module>); expected "
        "'pageant_missing_dependency', which the plugin imports, to be installed (a "
        "dependency missing from brokenplug's requirements?)"
    )
    assert broken.traceback is not None
    assert broken.traceback.splitlines()[-1] == (
        "ModuleNotFoundError: No module named 'pageant_missing_dependency'"
    )
    assert record(manager, "pageant[core]").status == "loaded"
    assert record(manager, "pageant-wisps[wisps]").status == "loaded"
    assert "wisps.summon" in manager.registry.actions


def test_a_module_that_raises_on_import_names_its_line_and_the_fitting_hint(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    site.install(
        "typoplug",
        {"typo": "typoplug"},
        {"typoplug": 'PLUGIN_INFO = {"owner": "typo", "contract": "^1.0"}\n\nTIERS = tierz\n'},
    )
    manager = load_plugins()
    typo = record(manager, "typoplug[typo]")
    assert typo.reason == (
        "typoplug[typo]: cannot be imported (NameError: name 'tierz' is not defined at "
        "typoplug.py:3 in <module>); expected the plugin's module to import without raising"
    )
    # The last frames, as Python prints them, end at the plugin's line.
    assert typo.traceback is not None
    assert 'typoplug.py", line 3, in <module>' in typo.traceback
    assert "TIERS = tierz" in typo.traceback
    # The server log has the same traceback, naming the plugin.
    logged = [r for r in caplog.records if "typoplug[typo]" in r.getMessage()]
    assert logged and "TIERS = tierz" in logged[0].getMessage()


def test_an_entry_point_naming_a_module_that_is_not_there_says_so(site: Site) -> None:
    site.install("ghostplug", {"ghost": "ghostmod"}, {})
    assert record(load_plugins(), "ghostplug[ghost]").reason == (
        "ghostplug[ghost]: cannot be imported (ModuleNotFoundError: No module named "
        "'ghostmod'); expected 'ghostmod' to name an importable module or class (is ghostplug "
        "installed in this environment?)"
    )


def test_an_entry_point_naming_a_missing_attribute_is_refused(site: Site) -> None:
    site.install(
        "lantern-plug", {"lantern": "lanternmod:Lantern"}, {"lanternmod": source("lantern")}
    )
    reason = record(load_plugins(), "lantern-plug[lantern]").reason
    assert reason == (
        "lantern-plug[lantern]: cannot be imported (AttributeError: module 'lanternmod' has no "
        "attribute 'Lantern'); expected 'lanternmod:Lantern' to name an importable module "
        "or class"
    )


def test_an_installed_plugin_loads_with_its_distribution_and_version(site: Site) -> None:
    site.install(
        "lantern-plug", {"lantern": "lanternmod"}, {"lanternmod": source("lantern")}, version="2.3"
    )
    manager = load_plugins()
    loaded = record(manager, "lantern-plug[lantern]")
    assert loaded.as_dict() == {
        "name": "lantern",
        "distribution": "lantern-plug",
        "version": "2.3",
        "entry_point": "lanternmod",
        "owner": "lantern",
        "contract": "^1.0",
        "status": "loaded",
        "reason": None,
        "traceback": None,
        "dropped": [],
        "problems": [],
        "settings": None,
    }
    assert manager.registry.owner_of("leases", "lantern.brightness") == "lantern-plug[lantern]"


def test_two_entries_naming_one_module_load_it_once(site: Site) -> None:
    site.install(
        "lantern-plug",
        {"a": "lanternmod", "b": "lanternmod"},
        {"lanternmod": source("lantern")},
    )
    manager = load_plugins()
    assert record(manager, "lantern-plug[a]").status == "loaded"
    assert record(manager, "lantern-plug[b]").reason == (
        "lantern-plug[b]: is the same plugin object as lantern-plug[a], already loaded; "
        "expected each entry point to name a plugin of its own"
    )


def _owner_module(owner: str) -> str:
    return f'PLUGIN_INFO = {{"owner": "{owner}", "contract": "^1.0"}}\n'


def test_discovery_is_sorted_and_deterministic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two folders on sys.path, filled in an order that is neither alphabetical nor reversed.
    with (
        fake_site(tmp_path / "one", monkeypatch) as one,
        fake_site(tmp_path / "two", monkeypatch) as two,
    ):
        one.install(
            "zeta-plug",
            {"b": "zeta_b", "a": "zeta_a"},
            {
                "zeta_b": _owner_module("zeta_b"),
                "zeta_a": _owner_module("zeta_a"),
            },
        )
        two.install("alpha-plug", {"z": "alpha_z"}, {"alpha_z": _owner_module("alpha_z")})
        one.install("mid-plug", {"m": "mid_m"}, {"mid_m": _owner_module("mid_m")})
        labels = [c.label for c in find_candidates()]
        ours = [
            label
            for label in labels
            if label.split("[")[0]
            in {"pageant", "alpha-plug", "mid-plug", "pageant-wisps", "zeta-plug"}
        ]
        assert ours == [
            "pageant[core]",
            "alpha-plug[z]",
            "mid-plug[m]",
            "pageant-wisps[wisps]",
            "zeta-plug[a]",
            "zeta-plug[b]",
        ]
        # Built-ins first, then every installed entry point sorted by (distribution, name).
        assert labels[0] == "pageant[core]"
        assert labels[1:] == sorted(labels[1:], key=lambda label: label.split("["))
        assert [c.label for c in find_candidates()] == labels
        first = [r.label for r in load_plugins().records]
        assert [r.label for r in load_plugins().records] == first == labels


def test_finding_imports_nothing(site: Site) -> None:
    site.install("brokenplug", {"brokenplug": "brokenplug"}, {"brokenplug": source("brokenplug")})
    found = [c for c in find_candidates() if c.distribution == "brokenplug"]
    assert [c.entry_point for c in found] == ["brokenplug"]
    assert "brokenplug" not in sys.modules


# ── one plugin manager per host; nothing at import ────────────────────────────


async def test_each_host_builds_its_own_plugin_manager() -> None:
    from tests.fixture_plugins import lantern

    first = Host(Settings(), discover=False, plugins=[candidate_for(lantern, "lantern")])
    second = Host(Settings(), discover=False)
    try:
        assert first.plugins is not second.plugins
        assert first.plugins.pm is not second.plugins.pm
        assert first.registry is not second.registry
        assert "lantern.light" in first.registry.actions
        assert "lantern.light" not in second.registry.actions
        assert lantern not in second.plugins.pm.get_plugins()
        # The built-in class is instantiated per host, so each keeps its own context.
        first_core = record(first.plugins, "pageant[core]").plugin
        second_core = record(second.plugins, "pageant[core]").plugin
        assert first_core is not second_core
        await first.start_plugins()
        assert first_core.context is not None and second_core.context is None
    finally:
        await first.close()
        await second.close()


def test_nothing_happens_at_import() -> None:
    script = textwrap.dedent(
        """
        import json, sys
        import importlib.metadata as metadata

        # pydantic looks up its own group while building models; any other lookup counts.
        calls = []
        real = metadata.entry_points
        metadata.entry_points = lambda *a, **k: calls.append(k.get("group")) or real(*a, **k)

        import pageant, pageant.plugins.loader, pageant.hosting, pageant.plugins.registry
        import pageant.cli
        import pageant.api.app

        print(json.dumps({
            "entry_point_lookups": [g for g in calls if g != "pydantic"],
            "plugins_imported": sorted(
                m for m in sys.modules
                if m.startswith(("pageant_wisps", "pageant.builtin_plugins"))
            ),
        }))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert json.loads(out) == {"entry_point_lookups": [], "plugins_imported": []}


def test_one_listing_serves_every_surface() -> None:
    manager = load(("future", declaring("future", contract="^2.0")))
    listing = plugin_listing(manager)
    assert [item["name"] for item in listing] == ["core", "future", "good"]
    assert listing[1]["status"] == "refused"
    assert "plugin" not in listing[0]
    assert [i["name"] for i in plugin_listing(manager, include_refused=False)] == ["core", "good"]
