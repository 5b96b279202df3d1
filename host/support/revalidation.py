"""Revalidation for the answers a client polls (the API's run console, the web console's live
fragments): a strong ``ETag`` that is a digest of the bytes sent, ``Cache-Control:
no-cache``, and ``304 Not Modified`` with no body when ``If-None-Match`` names the tag.

A digest of the body is exact whatever the body holds: anything that changes the bytes
(a step finishing, the clock moving a step's "took", a per-session CSRF token) changes the
tag, and nothing else does. The server still builds the body to know its tag; what a match
saves is sending it."""

from __future__ import annotations

import hashlib

from aiohttp import web


def tag_of(body: bytes) -> str:
    """The strong ``ETag`` of ``body``: a digest of its bytes, quoted."""
    return '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'


def tagged(
    request: web.Request, body: bytes, content_type: str, *, tag: str | None = None
) -> web.Response:
    """``body`` (``content_type``, UTF-8) with its ``ETag`` and ``Cache-Control: no-cache``:
    a client may keep the answer but asks again before using it. 304, the same headers and
    no body, when the request's ``If-None-Match`` names that tag (or is ``*``); one that
    names no tag of ours, malformed included, is ignored (a 200). ``tag``: the body's
    :func:`tag_of`, when the caller kept it with the body."""
    tag = tag or tag_of(body)
    headers = {"ETag": tag, "Cache-Control": "no-cache"}
    if matches(request.headers.get("If-None-Match", ""), tag):
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, headers=headers, content_type=content_type, charset="utf-8")


def matches(if_none_match: str, tag: str) -> bool:
    """Whether ``If-None-Match`` names ``tag``: ``*``, or among its comma-separated tags,
    compared weakly (a ``W/`` prefix ignored), as RFC 9110 asks for this header."""
    for listed in if_none_match.split(","):
        listed = listed.strip()
        if listed == "*" or listed.removeprefix("W/") == tag:
            return True
    return False
