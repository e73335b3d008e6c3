"""``message``: store a text as the run's output, the in-app notification."""

from __future__ import annotations

from typing import Any

from onthedot.actions.base import ActionContext
from onthedot.domain.errors import ValidationError

MAX_TEXT_CHARS = 10_000


class MessageAction:
    name = "message"
    uses_previous = False
    param_names: tuple[str, ...] = ("text",)

    def validate(self, params: dict[str, Any]) -> None:
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ValidationError("a message action needs a non-empty text", code="missing_field",
                                  field="action.text", expected="a non-empty string")
        if len(text) > MAX_TEXT_CHARS:
            raise ValidationError("message text is too long", field="action.text",
                                  expected=f"at most {MAX_TEXT_CHARS} characters")

    async def execute(self, params: dict[str, Any], ctx: ActionContext) -> Any:
        return {"message": params["text"], "job": ctx.job.name}
