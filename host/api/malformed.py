"""Requests aiohttp cannot parse: one WARNING line, never a traceback.

A header holding a NUL, a request line with bytes that are not a URL, a header line past
the limit: aiohttp answers each with a 400 before any route or middleware sees it, and then
logs the parser's exception at ERROR with its traceback on ``aiohttp.server``. Anyone can
send such bytes, and nothing in pageant went wrong, so an operator's error log must not
fill with them: :class:`MalformedRequests` turns each into one WARNING line naming the peer
and what the parser refused. Everything else aiohttp logs there passes untouched.
"""

from __future__ import annotations

import logging

from aiohttp.http_exceptions import HttpProcessingError

#: The logger aiohttp's request handler reports its errors on.
SERVER_LOGGER = "aiohttp.server"


class MalformedRequests(logging.Filter):
    """Rewrites aiohttp's report of a request it refused as malformed (a 4xx raised by its
    parser) into one WARNING line without a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError) or not 400 <= exc.code < 500:
            return True
        peer = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
        what = (exc.message or type(exc).__name__).splitlines()[0].rstrip(": ")
        record.msg = "refused a malformed request from %s (%d): %s"
        record.args = (peer, exc.code, what)
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info = record.exc_text = None
        return True


def quiet_malformed_requests() -> None:
    """Install :class:`MalformedRequests` on aiohttp's server logger (once per process)."""
    logger = logging.getLogger(SERVER_LOGGER)
    if not any(isinstance(f, MalformedRequests) for f in logger.filters):
        logger.addFilter(MalformedRequests())
