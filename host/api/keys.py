"""Typed application keys."""

from __future__ import annotations

from aiohttp import web

from pageant.hosting import Host

HOST = web.AppKey("host", Host)

ROUTES = web.AppKey("routes", list)
