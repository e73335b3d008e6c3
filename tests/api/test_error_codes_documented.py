"""Every error code the REST API can answer is named in docs/api.md: a client (or a model)
meeting a code must find what it means."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "onthedot"
# The modules whose errors reach a REST answer: the API itself, the service it calls, the
# quotas, the notify channels and schedules it validates, the action rules checked on create.
REST_REACHED = [*sorted((SRC / "api").glob("*.py")), SRC / "service.py", SRC / "quotas.py",
                SRC / "delivery" / "channels.py", *sorted((SRC / "schedule").glob("*.py")),
                SRC / "domain" / "errors.py", SRC / "actions" / "__init__.py",
                SRC / "actions" / "webhook.py", SRC / "actions" / "news.py"]
# Codes of base classes that every raise replaces with its own (see domain/errors.py), and
# the token scopes that only the CLI checks.
NOT_ANSWERED = {"error", "conflict", "forbidden", "action_failed", "delivery_failed",
                "bad_configuration", "invalid_scope"}
CODE = re.compile(r"""\bcode\s*=\s*["']([a-z_]+)["']""")


def test_every_rest_error_code_is_documented() -> None:
    documented = (ROOT / "docs" / "api.md").read_text("utf-8")
    codes = {c for path in REST_REACHED for c in CODE.findall(path.read_text("utf-8"))}
    assert "concurrent_change" in codes  # the scan finds codes raised with code=...
    missing = sorted(c for c in codes - NOT_ANSWERED if f"`{c}`" not in documented)
    assert missing == []
