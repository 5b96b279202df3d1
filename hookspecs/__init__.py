"""The plugin contract: what a pageant plugin implements and what it may declare.

A plugin author imports ``hookimpl`` (re-exported as ``pageant.hookimpl``) and the
declaration models from here. Everything in this package is part of the contract and
versioned by :data:`CONTRACT_VERSION`.
"""

from __future__ import annotations

from .envelope import Envelope, classify, run_with_envelope
from .markers import PROJECT_NAME, hookimpl, hookspec
from .models import (
    Action,
    ActionContext,
    AnnounceLeg,
    Budget,
    Lease,
    OptionItem,
    OptionSource,
    Param,
    Participant,
    PluginInfo,
    Resource,
    ResultEntry,
    Results,
    RunInfo,
    SendContext,
    Trigger,
    TriggerVariable,
)
from .specs import PageantSpecs

#: The plugin-contract version this host implements. ``contract-version.json`` at the
#: repository root carries the same value (a test keeps them equal); a root file does not
#: reach an installed wheel, so this constant is what the host reads.
CONTRACT_VERSION = "1.1.0"

__all__ = [
    "CONTRACT_VERSION",
    "PROJECT_NAME",
    "Action",
    "ActionContext",
    "AnnounceLeg",
    "Budget",
    "Envelope",
    "Lease",
    "OptionItem",
    "OptionSource",
    "PageantSpecs",
    "Param",
    "Participant",
    "PluginInfo",
    "Resource",
    "ResultEntry",
    "Results",
    "RunInfo",
    "SendContext",
    "Trigger",
    "TriggerVariable",
    "classify",
    "hookimpl",
    "hookspec",
    "run_with_envelope",
]
