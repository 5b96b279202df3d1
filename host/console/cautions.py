"""An event's save-time warnings as the console draws them, each with its "I know; don't
warn me again" box.

The warnings are the API's (:func:`pageant.events.authoring.cautions.spec_warnings`), of the
spec the page shows — the saved working copy, or the editor's fields as they stand when the
form is drawn again unsaved — so a box ticked before an "Add a step" stays ticked. A box is
an ``acknowledge`` field: saving with it ticked lists the warning's id in the spec's
``acknowledge``, and unticking an acknowledged warning's box gives the warning again. An id
acknowledged before whose warning is gone is carried in a hidden field, so a console save
keeps it as the API does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pageant.console.editor import readable
from pageant.events.authoring.cautions import spec_warnings

if TYPE_CHECKING:
    from pageant.plugins.registry import Registry


def cautions_view(spec: Mapping[str, Any], registry: Registry) -> dict[str, Any]:
    """``{"open", "acknowledged", "kept"}``: the warnings not acknowledged and those
    acknowledged, each ``{id, field, where, message, acknowledged}`` (``where`` as the form
    numbers it, ``field`` the id of its box), and the acknowledged ids no warning has now."""
    raw = spec.get("acknowledge")
    acknowledged = [i for i in raw if isinstance(i, str)] if isinstance(raw, list) else []
    every = spec_warnings({**spec, "acknowledge": []}, registry)
    drawn = [
        {
            "id": warning["id"],
            "field": f"ack-{k}",
            **readable(warning["message"]),
            "acknowledged": warning["id"] in acknowledged,
        }
        for k, warning in enumerate(every)
    ]
    given = {warning["id"] for warning in every}
    return {
        "open": [w for w in drawn if not w["acknowledged"]],
        "acknowledged": [w for w in drawn if w["acknowledged"]],
        "kept": [ident for ident in acknowledged if ident not in given],
    }
