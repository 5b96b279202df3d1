"""``core.email``: an announcement as a plain-text email, sent over SMTP with aiosmtplib.

One message to every address of ``smtp_to``, in one SMTP transaction, through the relay the
``smtp_*`` settings name (``starttls`` by default, ``tls``, or ``none``; a login when
``smtp_username`` is set). The subject is the announcement's title; the body its text, then
its time in the event's zone and the link to its public page.

Retries follow the webhook's rule: a step is retried only when the message certainly was not
delivered and trying again may help. What the relay refused with a 4xx reply (``451 try
again later``) and every failure before the first command of the transaction (no
connection, a timeout while connecting) are retried; a 5xx reply, a refused login, a
certificate the relay presents that does not verify, and anything lost after the message
was handed over (a connection dropped before the relay's answer) are not.
"""

from __future__ import annotations

import email.utils
from email.message import EmailMessage
from typing import Any

import aiosmtplib

from pageant.builtin_plugins.announce_text import NO_SERVICES, announcement_of, host_settings
from pageant.hookspecs import Announcement, SendContext


def _text(shown: Announcement) -> str:
    """The mail's text: the announcement's body, then its time and link when it has them."""
    lines = [shown.body]
    footer = [text for text in (shown.when_text, shown.link) if text]
    if footer:
        lines += ["", *footer]
    return "\n".join(lines) + "\n"


def email_preview(shown: Announcement) -> dict[str, Any]:
    """What :func:`compose` writes of ``shown`` that staff read: the subject and the text."""
    return {"subject": shown.title, "text": _text(shown)}


def compose(message: str, ctx: SendContext, settings: Any) -> EmailMessage:
    """The email ``core.email`` sends for ``message``."""
    shown = announcement_of(message, ctx)
    mail = EmailMessage()
    mail["Subject"] = shown.title
    mail["From"] = settings.smtp_from
    mail["To"] = ", ".join(settings.smtp_to)
    mail["Date"] = email.utils.formatdate(usegmt=True)
    # Fixed per step (its idempotency key), so a mail client shows a re-sent copy once.
    domain = settings.smtp_from.rpartition("@")[2] or "pageant.invalid"
    mail["Message-ID"] = f"<{ctx.idempotency_key}.pageant@{domain}>"
    mail.set_content(_text(shown))
    return mail


#: Failures of the connection itself (no route, a timeout, a reset), which may pass.
_TRANSIENT = (
    aiosmtplib.SMTPConnectError,
    aiosmtplib.SMTPTimeoutError,
    aiosmtplib.SMTPServerDisconnected,
    OSError,
)


def _unconfigured(settings: Any) -> str | None:
    missing = [
        name for name in ("smtp_host", "smtp_from", "smtp_to") if not getattr(settings, name)
    ]
    if missing:
        return f"email is not configured: set {', '.join(missing)}"
    return None


def _refused(code: int, what: str, reply: str) -> dict[str, Any]:
    """A relay's refusal: a 4xx reply is temporary (retry), a 5xx permanent."""
    return {
        "ok": False,
        "retry": 400 <= code < 500,
        "error": f"the relay refused the {what}: {code} {reply}".strip(),
    }


async def send_email(message: str, ctx: SendContext) -> dict[str, Any]:
    """Send the announcement to every ``smtp_to`` address (see the module's docstring for
    what is retried)."""
    if ctx.verify:
        # A dry run sends nothing; whether the relay is configured is the operator's concern.
        return {"ok": True}
    if ctx.services is None:
        return dict(NO_SERVICES)
    settings = host_settings(ctx)
    unconfigured = _unconfigured(settings)
    if unconfigured is not None:
        return {"ok": False, "retry": False, "error": unconfigured}
    mail = compose(message, ctx, settings)
    client = aiosmtplib.SMTP(
        hostname=settings.smtp_host,
        port=settings.smtp_port,
        timeout=settings.smtp_timeout_seconds,
        use_tls=settings.smtp_security == "tls",
        # True: STARTTLS or nothing; False: never, even when the relay offers it.
        start_tls=settings.smtp_security == "starttls",
        cert_bundle=settings.smtp_ca_file or None,
    )
    # Connecting, the TLS handshake and the login send nothing of the message.
    try:
        await client.connect()
        if settings.smtp_username:
            await client.login(settings.smtp_username, settings.smtp_password.get_secret_value())
    except aiosmtplib.SMTPAuthenticationError as exc:
        await _close(client)
        return {"ok": False, "retry": False, "error": f"the relay refused the login: {exc.code}"}
    except aiosmtplib.SMTPResponseException as exc:
        await _close(client)
        return _refused(exc.code, "connection", exc.message)
    except _TRANSIENT as exc:
        await _close(client)
        # A certificate that does not verify is the operator's to fix, not a moment's.
        retry = "CERTIFICATE_VERIFY_FAILED" not in str(exc)
        return {"ok": False, "retry": retry, "error": f"not sent: {type(exc).__name__}: {exc}"}
    except aiosmtplib.SMTPException as exc:
        # The relay cannot do what the settings ask (no STARTTLS, no login): a setting to fix.
        await _close(client)
        return {"ok": False, "retry": False, "error": f"not sent: {type(exc).__name__}: {exc}"}
    try:
        refused, _reply = await client.send_message(
            mail, sender=settings.smtp_from, recipients=list(settings.smtp_to)
        )
    except aiosmtplib.SMTPRecipientsRefused as exc:
        await _close(client)
        codes = [r.code for r in exc.recipients]
        named = "; ".join(f"{r.recipient}: {r.code} {r.message}" for r in exc.recipients)
        return {
            "ok": False,
            "retry": all(400 <= c < 500 for c in codes),
            "error": f"the relay refused every recipient ({named})",
        }
    except aiosmtplib.SMTPSenderRefused as exc:
        await _close(client)
        return _refused(exc.code, f"sender {exc.sender}", exc.message)
    except aiosmtplib.SMTPResponseException as exc:
        await _close(client)
        return _refused(exc.code, "message", exc.message)
    except (aiosmtplib.SMTPException, OSError) as exc:
        await _close(client)
        # Lost after the transaction began: the relay may have taken the message.
        return {"ok": False, "retry": False, "error": f"{type(exc).__name__}: {exc}"}
    await _close(client)
    if refused:
        named = "; ".join(
            f"{addr}: {reply.code} {reply.message}" for addr, reply in refused.items()
        )
        # Sent to the others: a retry would send them a second copy.
        return {"ok": False, "retry": False, "error": f"not sent to {named}"}
    return {"ok": True}


async def _close(client: aiosmtplib.SMTP) -> None:
    """QUIT if still connected; a failure to say goodbye changes nothing that was sent."""
    if client.is_connected:
        try:
            await client.quit()
        except (aiosmtplib.SMTPException, OSError):
            client.close()
