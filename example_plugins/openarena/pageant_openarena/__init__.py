"""openarena: run pageant world events on a real OpenArena server."""
