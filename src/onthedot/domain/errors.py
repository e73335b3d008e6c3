"""The one exception tree of onthedot.

Every error a user can cause is an ``OnTheDotError`` carrying a machine-readable ``code``, the
``field`` it concerns and what was ``expected`` there, so that a client (or a language model) can
correct its request. The edges map these once: HTTP to RFC 9457 problem+json, MCP to an ``isError``
tool result, the CLI to a one-line message and exit code 2.
"""

from __future__ import annotations

from typing import Any


class OnTheDotError(Exception):
    """Root of every error raised on purpose by onthedot."""

    code = "error"
    http_status = 500

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        field: str | None = None,
        expected: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.field = field
        self.expected = expected

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "field": self.field,
            "expected": self.expected,
        }


class ValidationError(OnTheDotError):
    """The request is well-formed but a value is not acceptable (HTTP 422)."""

    code = "invalid_value"
    http_status = 422


class ScheduleError(ValidationError):
    """A schedule, time or timezone cannot be used (invalid, too frequent, in the past, ...)."""

    code = "invalid_schedule"


class ParseError(ValidationError):
    """Natural-language text could not be understood; ``field`` names the part that was not read."""

    code = "could_not_understand"


class NotFoundError(OnTheDotError):
    """The object does not exist, or belongs to another user (we never leak which)."""

    code = "not_found"
    http_status = 404


class ConflictError(OnTheDotError):
    """The request conflicts with the current state (idempotency key reuse, illegal transition)."""

    code = "conflict"
    http_status = 409


class AuthError(OnTheDotError):
    """Missing or invalid credentials."""

    code = "unauthorized"
    http_status = 401


class ForbiddenError(OnTheDotError):
    """The caller is known but may not do this (e.g. a non-loopback page in token-less mode)."""

    code = "forbidden"
    http_status = 403


class ConfigError(OnTheDotError):
    """The deployment is configured in a way that cannot work (refuse to start)."""

    code = "bad_configuration"
    http_status = 500


class BackendError(OnTheDotError):
    """A store or queue backend failed; the driver error is kept as ``__cause__``."""

    code = "backend_unavailable"
    http_status = 503


class StatementRefusedError(BackendError):
    """The database is up but refused one statement for a reason of the moment (a deadlock, a
    serialization failure, a lock or statement timeout, a resource limit): other statements,
    and this one tried again, may well succeed. Unlike its parent it does not mean that the
    connection or the server is gone."""


class ActionError(OnTheDotError):
    """An action attempt failed (non-2xx webhook, timeout, ...); the run is retried while it has
    attempts left, unless ``retryable`` is False (another attempt would fail the same way)."""

    code = "action_failed"
    http_status = 502
    retryable = True

    def __init__(self, message: str, *, code: str | None = None, field: str | None = None,
                 expected: str | None = None, retryable: bool | None = None) -> None:
        super().__init__(message, code=code, field=field, expected=expected)
        if retryable is not None:  # else the class's answer
            self.retryable = retryable


class EgressRefusedError(ActionError):
    """An action tried to reach a destination the egress guard refuses (loopback, private,
    metadata, ...); the run fails at once, without retries."""

    code = "egress_refused"
    retryable = False


class DeliveryError(OnTheDotError):
    """Sending a run's output to one of its channels failed. It is recorded on the delivery and
    never fails the run; ``retryable`` says whether another try could succeed."""

    code = "delivery_failed"
    http_status = 502

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class QuotaError(OnTheDotError):
    """A per-user limit is reached (active jobs, creates per minute): HTTP 429. A rate says
    when to try again (``retry_after_seconds``, HTTP ``Retry-After``); a hard cap (active jobs)
    has None there, since no wait alone frees it."""

    code = "quota_exceeded"
    http_status = 429

    def __init__(self, message: str, *, code: str | None = None, field: str | None = None,
                 expected: str | None = None, retry_after_seconds: int | None = None) -> None:
        super().__init__(message, code=code, field=field, expected=expected)
        self.retry_after_seconds = retry_after_seconds

    def to_dict(self) -> dict[str, Any]:
        if self.retry_after_seconds is None:
            return super().to_dict()
        return {**super().to_dict(), "retry_after_seconds": self.retry_after_seconds}
