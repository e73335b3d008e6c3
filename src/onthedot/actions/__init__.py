"""Pluggable executors: a registry of actions by name."""

from __future__ import annotations

from typing import Any

from onthedot.actions.base import Action, ActionContext
from onthedot.actions.catalog import FeedCatalog
from onthedot.actions.egress import EgressGuard, guarded_client
from onthedot.actions.message import MessageAction
from onthedot.actions.model import ModelEndpoint
from onthedot.actions.model_digest import ModelDigest
from onthedot.actions.news import NewsDigestAction
from onthedot.actions.prompt import PromptAction
from onthedot.actions.signing import WebhookSigner
from onthedot.actions.webhook import WebhookAction
from onthedot.config import Settings
from onthedot.domain.errors import ValidationError

__all__ = ["Action", "ActionContext", "ActionRegistry", "EgressGuard", "ModelEndpoint",
           "WebhookSigner", "default_registry", "guarded_client"]


class ActionRegistry:
    def __init__(self, actions: list[Action] | None = None) -> None:
        self._actions: dict[str, Action] = {}
        for action in actions or []:
            self.register(action)

    def register(self, action: Action) -> None:
        self._actions[action.name] = action

    @property
    def names(self) -> list[str]:
        return sorted(self._actions)

    def get(self, name: str) -> Action:
        action = self._actions.get(name)
        if action is None:
            raise ValidationError(f"unknown action type {name!r}", code="unknown_action",
                                  field="action.type", expected=" | ".join(self.names))
        return action

    def validate(self, action: dict[str, Any]) -> None:
        kind = action.get("type")
        if not isinstance(kind, str):
            raise ValidationError("the action needs a type", code="missing_field",
                                  field="action.type", expected=" | ".join(self.names))
        known = self.get(kind)
        allowed = ("type", *known.param_names)
        for key in action:
            if key not in allowed:
                raise ValidationError(f"a {kind} action has no parameter {key!r}",
                                      code="unknown_field", field=f"action.{key}",
                                      expected=f"only the parameters of a {kind} action: "
                                               + ", ".join(allowed))
        known.validate(action)


def default_registry(settings: Settings, signer: WebhookSigner | None = None) -> ActionRegistry:
    """The built-in actions, their outbound calls judged by the deployment's egress allowlist;
    webhooks signed by ``signer`` (none: unsigned). With a model configured
    (``llm_base_url``), ``prompt`` runs and news digests are written by it; without one,
    ``prompt`` is refused at creation and digests are offline. Raises ConfigError for an
    unusable news feeds file or model URL (the process refuses to start)."""
    guard = EgressGuard.from_settings(settings)
    catalog = FeedCatalog.from_settings(settings)
    endpoint = ModelEndpoint.from_settings(settings)
    writer = None if endpoint is None else ModelDigest(endpoint)
    return ActionRegistry([MessageAction(), WebhookAction(guard, signer),
                           NewsDigestAction(guard, catalog, writer),
                           PromptAction(guard, endpoint, catalog)])
