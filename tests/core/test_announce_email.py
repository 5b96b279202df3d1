"""The email announce leg against a real SMTP server on 127.0.0.1 (aiosmtpd): the message as
received, STARTTLS with a login against a certificate the test's own authority issued, and
which failures are retried."""

from __future__ import annotations

import email
import email.policy
import logging
import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trustme
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult
from pydantic import SecretStr

from pageant.engine import Engine
from pageant.runs.create import start_now
from tests.factories import announce, log_lines, make_host, phase, publish_event, spec, step_rows

PASSWORD = "hunter2-relay-secret"


@dataclass
class Mailbox:
    """What the relay was sent, and how it answers."""

    received: list[dict[str, Any]] = field(default_factory=list)
    #: Replies to DATA, in order, before it accepts (``"451 4.3.0 try later"``).
    data_replies: list[str] = field(default_factory=list)
    #: Recipients refused at RCPT, with the reply.
    refuse: dict[str, str] = field(default_factory=dict)
    #: Every login tried, as (user, accepted).
    logins: list[tuple[bytes, bool]] = field(default_factory=list)

    def authenticate(self, server, session, envelope, mechanism, auth_data) -> AuthResult:
        ok = auth_data.login == b"herald" and auth_data.password == PASSWORD.encode()
        self.logins.append((auth_data.login, ok))
        return AuthResult(success=ok, handled=False)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.refuse:
            return self.refuse[address]
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.data_replies:
            return self.data_replies.pop(0)
        self.received.append(
            {
                "from": envelope.mail_from,
                "to": list(envelope.rcpt_tos),
                "message": email.message_from_bytes(envelope.content, policy=email.policy.default),
                "tls": server.transport.get_extra_info("ssl_object") is not None,
                "authenticated": session.authenticated,
            }
        )
        return "250 OK"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def relay():
    """Start a plain relay (``relay(...)`` with the SMTP server's options); stopped after."""
    started: list[Controller] = []

    def start(*, login: bool = False, **options: Any) -> tuple[Mailbox, int]:
        box, port = Mailbox(), _free_port()
        if login:
            options["authenticator"] = box.authenticate
        controller = Controller(box, hostname="127.0.0.1", port=port, **options)
        controller.start()
        started.append(controller)
        return box, port

    yield start
    for controller in started:
        controller.stop()


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


def _tls_context(authority: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    return context


async def _announce(settings, db, clock, port: int, *, visibility="staff", **changes):
    """Run one announce step on core.email; answers (host, run id, the step row, event)."""
    update = {
        "smtp_host": "127.0.0.1",
        "smtp_port": port,
        "smtp_security": "none",
        "smtp_from": "events@example.org",
        "smtp_to": ("players@example.org", "staff@example.org"),
        "smtp_timeout_seconds": 5.0,
        "public_page_url": "https://example.org/events/{slug}",
        **changes,
    }
    host = make_host(settings.model_copy(update=update), db, clock)
    event_spec = {
        **spec(phase("p", announce("Muster in Yew Woods", leg="core.email"))),
        "announcement": {"title": "{title} at {when}", "body": "{message}.\nBring a friend."},
    }
    event = await publish_event(
        db,
        clock.now(),
        event_spec,
        title="Champion Muster",
        timezone="America/New_York",
        visibility=visibility,
    )
    run_id, _ = await start_now(host, event.id, scope="", actor="admin:test")
    async with Engine(host) as engine:
        await engine.tick()
    (made,) = await step_rows(db, run_id)
    return host, run_id, made, event


async def test_the_email_arrives_with_the_rendered_subject_body_and_recipients(
    settings, db, clock, relay
):
    box, port = relay()
    host, _run_id, made, event = await _announce(settings, db, clock, port, visibility="public")
    try:
        assert made.status == "done"
        (got,) = box.received
        assert got["from"] == "events@example.org"
        assert got["to"] == ["players@example.org", "staff@example.org"]
        message = got["message"]
        # 2027-03-01 12:00 UTC is 07:00 in New York (EST).
        assert message["Subject"] == "Champion Muster at Mon 1 Mar 2027, 07:00 EST"
        assert message["From"] == "events@example.org"
        assert message["To"] == "players@example.org, staff@example.org"
        assert message["Message-ID"] == f"<{made.idempotency_key}.pageant@example.org>"
        assert message.get_content().replace("\r\n", "\n") == (
            "Muster in Yew Woods.\nBring a friend.\n\n"
            "Mon 1 Mar 2027, 07:00 EST\n"
            f"https://example.org/events/{event.slug}\n"
        )
        assert got["tls"] is False
    finally:
        await host.close()


async def test_a_staff_only_event_sends_no_link(settings, db, clock, relay):
    box, port = relay()
    host, _run_id, made, event = await _announce(settings, db, clock, port, visibility="staff")
    try:
        assert made.status == "done"
        assert event.slug not in box.received[0]["message"].get_content()
    finally:
        await host.close()


async def test_starttls_and_a_login_deliver_over_tls(
    settings, db, clock, relay, authority, tmp_path
):
    box, port = relay(
        tls_context=_tls_context(authority),
        require_starttls=True,
        login=True,
    )
    ca_file = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    host, _run_id, made, _ = await _announce(
        settings,
        db,
        clock,
        port,
        smtp_security="starttls",
        smtp_ca_file=str(ca_file),
        smtp_username="herald",
        smtp_password=SecretStr(PASSWORD),
    )
    try:
        assert made.status == "done", made.last_error
        (got,) = box.received
        assert (got["tls"], got["authenticated"]) == (True, True)
        assert box.logins == [(b"herald", True)]
    finally:
        await host.close()


async def test_tls_from_the_first_byte_delivers(settings, db, clock, relay, authority, tmp_path):
    box, port = relay(ssl_context=_tls_context(authority))
    ca_file = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    host, _run_id, made, _ = await _announce(
        settings, db, clock, port, smtp_security="tls", smtp_ca_file=str(ca_file)
    )
    try:
        assert made.status == "done", made.last_error
        (got,) = box.received
        assert got["tls"] is True
    finally:
        await host.close()


async def test_a_certificate_the_host_does_not_trust_sends_nothing_and_is_not_retried(
    settings, db, clock, relay, authority
):
    box, port = relay(tls_context=_tls_context(authority), require_starttls=True)
    host, _run_id, made, _ = await _announce(settings, db, clock, port, smtp_security="starttls")
    try:
        assert (made.status, made.attempts) == ("failed", 1)
        assert "CERTIFICATE_VERIFY_FAILED" in made.last_error
        assert box.received == []
    finally:
        await host.close()


async def test_a_relay_without_starttls_is_not_spoken_to_in_the_clear(settings, db, clock, relay):
    box, port = relay()
    host, _run_id, made, _ = await _announce(settings, db, clock, port, smtp_security="starttls")
    try:
        assert (made.status, made.attempts) == ("failed", 1), made.last_error
        assert "STARTTLS" in made.last_error
        assert box.received == []
    finally:
        await host.close()


async def test_a_refused_login_fails_for_good_and_never_shows_the_password(
    settings, db, clock, relay, authority, tmp_path, caplog
):
    caplog.set_level(logging.DEBUG)
    box, port = relay(tls_context=_tls_context(authority), require_starttls=True, login=True)
    ca_file = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    wrong = "wrong-" + PASSWORD
    host, run_id, made, _ = await _announce(
        settings,
        db,
        clock,
        port,
        smtp_security="starttls",
        smtp_ca_file=str(ca_file),
        smtp_username="herald",
        smtp_password=SecretStr(wrong),
    )
    try:
        assert (made.status, made.attempts) == ("failed", 1)
        assert made.last_error.startswith("the relay refused the login: 535")
        assert box.received == []
        # aiosmtplib tries each mechanism the relay offers; none got in.
        assert box.logins and all(not ok for _user, ok in box.logins)
        lines = await log_lines(db, run_id)
        assert PASSWORD not in made.last_error
        assert not any(PASSWORD in repr(line.detail) for line in lines)
        assert PASSWORD not in caplog.text
        assert PASSWORD not in repr(host.settings) and PASSWORD not in str(host.settings)
    finally:
        await host.close()


@pytest.mark.parametrize(
    ("reply", "status"),
    [("451 4.3.0 try again later", "pending"), ("554 5.6.0 rejected", "failed")],
)
async def test_a_temporary_refusal_is_retried_and_a_permanent_one_is_not(
    settings, db, clock, relay, reply, status
):
    box, port = relay()
    box.data_replies = [reply]
    host, run_id, made, _ = await _announce(settings, db, clock, port)
    try:
        assert (made.status, made.attempts) == (status, 1)
        assert reply.split()[0] in made.last_error
        assert box.received == []
        assert len(await log_lines(db, run_id, "step.retry")) == (1 if status == "pending" else 0)
    finally:
        await host.close()


async def test_a_recipient_refused_while_the_other_was_sent_is_not_retried(
    settings, db, clock, relay
):
    box, port = relay()
    box.refuse = {"staff@example.org": "550 5.1.1 no such mailbox"}
    host, _run_id, made, _ = await _announce(settings, db, clock, port)
    try:
        assert (made.status, made.attempts) == ("failed", 1)
        assert "staff@example.org: 550" in made.last_error
        (got,) = box.received
        assert got["to"] == ["players@example.org"]
    finally:
        await host.close()


@pytest.mark.parametrize(
    ("reply", "status"), [("450 4.2.1 busy", "pending"), ("550 5.1.1 no", "failed")]
)
async def test_every_recipient_refused_is_retried_only_when_the_relay_said_later(
    settings, db, clock, relay, reply, status
):
    box, port = relay()
    box.refuse = {"players@example.org": reply, "staff@example.org": reply}
    host, _run_id, made, _ = await _announce(settings, db, clock, port)
    try:
        assert (made.status, made.attempts) == (status, 1)
        assert made.last_error.startswith("the relay refused every recipient")
        assert box.received == []
    finally:
        await host.close()


async def test_a_relay_that_is_not_listening_is_retried(settings, db, clock):
    host, _run_id, made, _ = await _announce(settings, db, clock, _free_port())
    try:
        assert (made.status, made.attempts) == ("pending", 1)
        assert made.last_error.startswith("not sent")
    finally:
        await host.close()


async def test_an_unconfigured_email_leg_fails_for_good(settings, db, clock):
    host, _run_id, made, _ = await _announce(settings, db, clock, 25, smtp_host="", smtp_to=())
    try:
        assert (made.status, made.attempts) == ("failed", 1)
        assert made.last_error == "email is not configured: set smtp_host, smtp_to"
    finally:
        await host.close()


def test_the_ca_file_path_is_only_a_setting(tmp_path: Path) -> None:
    """A missing CA file is the relay connection's failure at send time, not a crash at
    load: the settings take any path."""
    from pageant.support.settings import Settings

    assert Settings(smtp_ca_file=str(tmp_path / "none.pem")).smtp_ca_file.endswith("none.pem")
