"""Delivery: a succeeded run's output to its job's channels: the inbox exactly once per run,
e-mail and webhooks at least once per (run, channel), retried on a stored schedule. See
``deliverer.py`` for the order of events and docs/delivery.md."""

from onthedot.delivery.channels import MAX_CHANNELS, smtp_missing, validate_notify
from onthedot.delivery.deliverer import Deliverer
from onthedot.delivery.render import wants_delivery

__all__ = ["MAX_CHANNELS", "Deliverer", "smtp_missing", "validate_notify", "wants_delivery"]
