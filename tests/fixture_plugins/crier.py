"""crier: a fixture plugin whose announce legs offer previews, well and badly (contract 1.5).

``crier.bell`` previews the line it rings; ``crier.cracked``'s preview raises;
``crier.full``'s answers exactly as much JSON as a preview may (64 KiB) and ``crier.hoard``'s
one byte more; ``crier.list``'s answers a list, ``crier.clock``'s a mapping JSON cannot
write; ``crier.mute`` offers none.
"""

from __future__ import annotations

from typing import Any

from pageant import hookimpl

PLUGIN_INFO = {"owner": "crier", "contract": "^1.5"}


def bell_line(shown: Any) -> dict[str, Any]:
    return {"line": f"Hear ye! {shown.title}: {shown.body}", "when": shown.when_text}


def cracked(shown: Any) -> dict[str, Any]:
    raise ValueError("the bell is cracked")


def full(shown: Any) -> dict[str, Any]:
    # {"line": "..."} is 12 bytes of JSON around the line.
    return {"line": "x" * (64 * 1024 - 12)}


def hoard(shown: Any) -> dict[str, Any]:
    return {"line": "x" * (64 * 1024 - 11)}


def as_list(shown: Any) -> list[str]:
    return [shown.title]


def clock(shown: Any) -> dict[str, Any]:
    return {"when": shown.when}


async def ring(message: str, ctx: Any) -> dict[str, Any]:
    return {"ok": True}


@hookimpl
def pageant_announce_legs() -> list[dict[str, Any]]:
    return [
        {"id": "crier.bell", "label": "Bell", "send": ring, "preview": bell_line},
        {"id": "crier.cracked", "label": "Cracked bell", "send": ring, "preview": cracked},
        {"id": "crier.full", "label": "Full", "send": ring, "preview": full},
        {"id": "crier.hoard", "label": "Hoard", "send": ring, "preview": hoard},
        {"id": "crier.list", "label": "List", "send": ring, "preview": as_list},
        {"id": "crier.clock", "label": "Clock", "send": ring, "preview": clock},
        {"id": "crier.mute", "label": "Mute", "send": ring},
    ]
