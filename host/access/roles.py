"""Every role, and every set of roles a route or a rule is gated on - defined once here.

Staff roles (admin, editor, moderator) read the admin API; ``game`` is for game servers,
which fire triggers and do nothing else. The routes, the role floor and token creation
all name these sets rather than spelling their own.
"""

from __future__ import annotations

#: Every role a token may carry.
ROLES = ("admin", "editor", "moderator", "game")
#: The people: who may read the admin API.
STAFF = ("admin", "editor", "moderator")
#: Who may author (create, edit, series writes).
AUTHORS = ("admin", "editor")
#: Who alone may publish, archive and start a run now.
ADMIN = ("admin",)
#: Who may drive a run from its console (pause, resume, cancel, advance, step controls).
CONTROLLERS = ("admin", "moderator")
#: Who may fire a trigger: game servers, and an admin by hand.
FIRERS = ("admin", "game")
#: The roles the role floor never refuses: they may author any step, whatever its risk.
FLOOR_EXEMPT_ROLES = ("admin",)
#: A game server: fires triggers, and syncs on the game link for the servers it is bound to.
GAME = ("game",)
