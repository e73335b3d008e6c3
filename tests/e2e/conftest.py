"""The end-to-end tests receive mail as the delivery tests do."""

from tests.delivery.conftest import mailbox  # noqa: F401 - a fixture, shared
