"""Issue 9 §1: the webhook action signs its requests with the user's secret, sends a default
body and a User-Agent; secrets rotate with a grace period. Real engine, real receiver."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from onthedot import __version__
from onthedot.actions.signing import ROTATION_GRACE_SECONDS, create_secret, signature_header
from onthedot.domain.models import JobParams, RunStatus
from tests.delivery.test_delivery import only_run, verify
from tests.engine.conftest import Engine
from tests.support.webhook import WebhookReceiver

NOW = JobParams(type="immediate")


def signatures(header: str) -> list[str]:
    return [p.split("=", 1)[1] for p in header.split(",") if p.startswith("v1=")]


async def test_the_webhook_action_signs_its_default_body(env: Engine,
                                                         webhook: WebhookReceiver) -> None:
    secret = await create_secret(env.rt.store, "alice", env.clock.now())
    view = await env.create(NOW, {"type": "webhook", "url": webhook.url}, name="ping",
                            notify=[])
    await env.settle()

    run = await only_run(env, view.job.job_id)
    assert run.status is RunStatus.SUCCEEDED
    [received] = webhook.received
    assert received.body == {"job_id": view.job.job_id, "job_name": "ping",
                             "run_id": run.run_id,
                             "scheduled_at": run.scheduled_at.isoformat(), "attempt": 1}
    assert received.headers["user-agent"] == f"onthedot/{__version__}"
    assert received.idempotency_key == run.run_id
    header = received.headers["x-onthedot-signature"]
    assert header.startswith(f"t={int(env.clock.now().timestamp())},v1=")
    assert verify(secret, header, received.raw)
    assert not verify(secret, header, received.raw + b" ")  # the exact bytes are signed


@pytest.mark.parametrize("method", ["PUT", "GET"])
async def test_the_users_body_and_headers_are_signed_as_sent(
        env: Engine, webhook: WebhookReceiver, method: str) -> None:
    secret = await create_secret(env.rt.store, "alice", env.clock.now())
    await env.create(NOW, {"type": "webhook", "url": webhook.url, "method": method,
                           "body": {"任務": "總結"},
                           "headers": {"User-Agent": "mine/1", "X-Onthedot-Signature": "forged"}},
                     notify=[])
    await env.settle()
    [received] = webhook.received
    assert received.headers["user-agent"] == "mine/1"
    header = received.headers["x-onthedot-signature"]
    assert "forged" not in header
    assert verify(secret, header, received.raw)
    assert received.body == ({"任務": "總結"} if method == "PUT" else None)


async def test_no_secret_no_signature(env: Engine, webhook: WebhookReceiver) -> None:
    await create_secret(env.rt.store, "bob", env.clock.now())  # another user's secret
    await env.create(NOW, {"type": "webhook", "url": webhook.url}, notify=[])
    await env.settle()
    [received] = webhook.received
    assert "x-onthedot-signature" not in received.headers
    assert received.headers["user-agent"].startswith("onthedot/")


async def test_after_a_rotation_both_secrets_sign_for_the_grace_period(
        env: Engine, webhook: WebhookReceiver) -> None:
    old = await create_secret(env.rt.store, "alice", env.clock.now())
    env.clock.advance(hours=1)
    new = await create_secret(env.rt.store, "alice", env.clock.now())
    action = {"type": "webhook", "url": webhook.url}

    await env.create(NOW, action, notify=[])
    await env.settle()
    env.clock.advance(ROTATION_GRACE_SECONDS + timedelta(minutes=1).total_seconds())
    await env.create(NOW, action, notify=[])
    await env.settle()

    during, after = webhook.received
    header = during.headers["x-onthedot-signature"]
    assert len(signatures(header)) == 2
    assert verify(new, header, during.raw)
    assert verify(old, header, during.raw)
    header = after.headers["x-onthedot-signature"]
    assert len(signatures(header)) == 1
    assert verify(new, header, after.raw)
    assert not verify(old, header, after.raw)


def test_the_documented_verification_snippet_accepts_our_signatures() -> None:
    """docs/delivery.md tells receivers how to verify; that code must accept what we send and
    refuse a changed body, another secret and an old timestamp."""
    doc = (Path(__file__).parents[2] / "docs" / "delivery.md").read_text("utf-8")
    section = doc.split("### Verifying a signature (Python)", 1)[1]
    code = section.split("```python", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/delivery.md", "exec"), namespace)
    verify_doc = namespace["verify"]
    body = '{"run_id":"r-1","text":"台股收高"}'.encode()
    now = int(time.time())
    header = signature_header(["whsec_new", "whsec_old"], now, body)

    assert verify_doc("whsec_new", header, body)
    assert verify_doc("whsec_old", header, body)
    assert not verify_doc("whsec_other", header, body)
    assert not verify_doc("whsec_new", header, body + b" ")
    assert not verify_doc("whsec_new", signature_header(["whsec_new"], now - 3600, body), body)
