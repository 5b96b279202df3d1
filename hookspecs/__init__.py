"""The plugin contract: what a pageant plugin implements and what it may declare.

A plugin author imports ``hookimpl`` (re-exported as ``pageant.hookimpl``), the
declaration models, the contexts the host hands over (:class:`PluginContext`,
:class:`StepServices`) and the envelope's reader (:func:`classify`) from here. What
``__all__`` names is the contract, versioned by :data:`CONTRACT_VERSION`.
"""

from __future__ import annotations

from .context import (
    ActionContext,
    Announcement,
    Declarations,
    HeldResource,
    HostSettings,
    PluginContext,
    Posted,
    ReadContext,
    Resource,
    RunInfo,
    SendContext,
    StepServices,
)
from .envelope import Envelope, classify
from .link import Down, GameLink, LinkFailure, LinkUse, NotDelivered, Unanswered
from .markers import PROJECT_NAME, hookimpl, hookspec
from .models import (
    UNKNOWN,
    Action,
    AnnounceLeg,
    Budget,
    Lease,
    OptionItem,
    OptionSource,
    Param,
    Participant,
    PluginInfo,
    Reading,
    ResultEntry,
    Results,
    Trigger,
    TriggerVariable,
    Unknown,
)
from .specs import PageantSpecs

#: The plugin-contract version this host implements. ``contract-version.json`` at the
#: repository root carries the same value (a test keeps them equal); a root file does not
#: reach an installed wheel, so this constant is what the host reads.
CONTRACT_VERSION = "1.5.0"

__all__ = [
    "CONTRACT_VERSION",
    "PROJECT_NAME",
    "UNKNOWN",
    "Action",
    "ActionContext",
    "AnnounceLeg",
    "Announcement",
    "Budget",
    "Declarations",
    "Down",
    "Envelope",
    "GameLink",
    "HeldResource",
    "HostSettings",
    "Lease",
    "LinkFailure",
    "LinkUse",
    "NotDelivered",
    "OptionItem",
    "OptionSource",
    "PageantSpecs",
    "Param",
    "Participant",
    "PluginContext",
    "PluginInfo",
    "Posted",
    "ReadContext",
    "Reading",
    "Resource",
    "ResultEntry",
    "Results",
    "RunInfo",
    "SendContext",
    "StepServices",
    "Trigger",
    "TriggerVariable",
    "Unanswered",
    "Unknown",
    "classify",
    "hookimpl",
    "hookspec",
]
