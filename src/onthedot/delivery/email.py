"""The ``email`` channel: one message per (run, address), over SMTP with aiosmtplib.

The mail server is operator configuration (``ONTHEDOT_SMTP_URL``), so it is trusted and
connected to directly, loopback or private included; recipients' domains are never connected
to. Every message carries a ``Message-ID`` made from the run id and the channel, so a message
sent again (after a crash, or as a retry) has the same id as the first and a mail system can
drop it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from email.utils import format_datetime, parseaddr
from urllib.parse import parse_qs, unquote, urlsplit

import aiosmtplib

from onthedot.config import Settings
from onthedot.delivery.channels import delivery_id
from onthedot.delivery.render import html_of, subject_of
from onthedot.domain.errors import ConfigError, DeliveryError
from onthedot.domain.models import Job, JobRun

SMTP_TIMEOUT_SECONDS = 30.0
DEFAULT_PORTS = {"smtp": 25, "smtps": 465}
TRUE_WORDS = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class SmtpConfig:
    host: str
    port: int
    sender: str
    username: str | None = None
    password: str | None = None
    use_tls: bool = False  # smtps://: TLS from the first byte
    start_tls: bool | None = None  # ?starttls=true / false; absent: upgrade when offered

    @classmethod
    def from_settings(cls, settings: Settings) -> SmtpConfig | None:
        """None when e-mail is not configured (the channel then fails every send)."""
        if settings.smtp_url is None or not settings.smtp_from:
            return None
        parts = urlsplit(settings.smtp_url)
        if parts.hostname is None:  # config.py checks this at start-up
            raise ConfigError("ONTHEDOT_SMTP_URL has no host", field="smtp_url",
                              expected="smtp://user:pass@host:port")
        query = parse_qs(parts.query)
        starttls = query.get("starttls", [None])[0]
        return cls(host=parts.hostname, port=parts.port or DEFAULT_PORTS[parts.scheme],
                   sender=settings.smtp_from,
                   username=unquote(parts.username) if parts.username else None,
                   password=unquote(parts.password) if parts.password else None,
                   use_tls=parts.scheme == "smtps",
                   start_tls=None if starttls is None else starttls.lower() in TRUE_WORDS)


def message_id(run_id: str, channel_key: str, sender: str) -> str:
    """The same for every send of one run to one address: ``<delivery id@sender's domain>``."""
    domain = parseaddr(sender)[1].rpartition("@")[2] or "onthedot.invalid"
    return f"<{delivery_id(run_id, channel_key)}@{domain}>"


def build_message(*, job: Job, run: JobRun, to: str, text: str, sender: str, channel_key: str,
                  now: datetime) -> EmailMessage:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = to
    message["Subject"] = subject_of(job)
    message["Date"] = format_datetime(now)
    message["Message-ID"] = message_id(run.run_id, channel_key, sender)
    message["Auto-Submitted"] = "auto-generated"  # RFC 3834: no auto-replies to this
    message["X-Onthedot-Run-Id"] = run.run_id
    message["X-Onthedot-Job-Id"] = job.job_id
    message.set_content(text)
    message.add_alternative(html_of(job, text), subtype="html")
    return message


class EmailChannel:
    kind = "email"

    def __init__(self, config: SmtpConfig | None) -> None:
        self.config = config

    async def send(self, message: EmailMessage) -> None:
        async with self.sending(message):
            pass

    @contextlib.asynccontextmanager
    async def sending(self, message: EmailMessage) -> AsyncIterator[None]:
        """Send ``message``; the block runs once the server accepted it (its answer to DATA),
        before the session's QUIT, so the caller records the acceptance without waiting for one
        more round trip. A refusal raises DeliveryError before the block; once the message is
        accepted, the QUIT's outcome changes nothing."""
        config = self.config
        if config is None:
            raise DeliveryError("e-mail is not configured on this server (ONTHEDOT_SMTP_URL, "
                                "ONTHEDOT_SMTP_FROM)", retryable=False)
        client = aiosmtplib.SMTP(
            hostname=config.host, port=config.port, username=config.username,
            password=config.password, use_tls=config.use_tls, start_tls=config.start_tls,
            timeout=SMTP_TIMEOUT_SECONDS)
        try:
            try:
                await client.connect()
                await client.send_message(message)
            except aiosmtplib.SMTPRecipientsRefused as exc:
                codes = [r.code for r in exc.recipients] or [0]
                raise DeliveryError(f"the mail server refused the recipient ({codes[0]})",
                                    retryable=all(400 <= c < 500 for c in codes)) from exc
            except aiosmtplib.SMTPResponseException as exc:
                raise DeliveryError(f"the mail server answered {exc.code}: {exc.message[:200]}",
                                    retryable=400 <= exc.code < 500) from exc
            except (aiosmtplib.SMTPException, OSError) as exc:
                raise DeliveryError(f"could not reach the mail server: {type(exc).__name__}: "
                                    f"{exc}") from exc
            yield
        finally:
            await _end(client)


async def _end(client: aiosmtplib.SMTP) -> None:
    """QUIT if the session is still up, else just close the connection."""
    if client.is_connected:
        try:
            await client.quit()
        except (aiosmtplib.SMTPException, OSError):
            client.close()
