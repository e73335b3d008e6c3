"""Metrics at scrape time: the oldest due run and run lateness, the standalone /metrics server
of a role without an API (ONTHEDOT_METRICS_PORT), and a scrape while the store is down."""

from __future__ import annotations

import logging

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from onthedot.domain.clock import FakeClock
from onthedot.domain.errors import BackendError
from onthedot.runtime import Runtime
from onthedot.watcher import Watcher
from onthedot.worker import Worker
from tests.api.conftest import job_body


def samples(text: str) -> dict[str, float]:
    """Unlabelled samples (and labelled ones as name{k=v}) by name."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            found[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return found


async def test_oldest_due_run_and_lateness(client: httpx.AsyncClient, rt: Runtime,
                                           clock: FakeClock) -> None:
    created = await client.post("/v1/jobs", json=job_body(job_params={"type": "immediate"}))
    assert created.status_code == 201, created.text
    scraped = samples((await client.get("/metrics")).text)
    assert scraped["onthedot_oldest_due_run_age_seconds"] == 0.0  # due this instant

    # No watcher or worker runs in this test: the run waits, and the gauge says for how long.
    clock.advance(seconds=90)
    scraped = samples((await client.get("/metrics")).text)
    assert scraped["onthedot_oldest_due_run_age_seconds"] == 90.0
    assert scraped["onthedot_run_lateness_seconds_count"] == 0.0

    # Dispatched, it is still not started: the age keeps counting from its schedule.
    dispatcher = Watcher(rt.store, rt.queue, rt.clock, rt.settings, rt.metrics, "test")
    await dispatcher.refresh_shards()
    assert await dispatcher.run_once() == 1
    clock.advance(seconds=10)
    scraped = samples((await client.get("/metrics")).text)
    assert scraped["onthedot_oldest_due_run_age_seconds"] == 100.0
    assert scraped["onthedot_runs{status=ENQUEUED}"] == 1.0

    # A worker starts it 100 s late: the lateness histogram has it; nothing is due any more.
    worker = Worker(rt.store, rt.queue, rt.clock, rt.settings, rt.actions, rt.metrics)
    try:
        assert await worker.run_once() == 1
    finally:
        await worker.aclose()
    scraped = samples((await client.get("/metrics")).text)
    assert scraped["onthedot_run_lateness_seconds_count"] == 1.0
    assert scraped["onthedot_run_lateness_seconds_sum"] == 100.0
    assert scraped["onthedot_run_lateness_seconds_bucket{le=60.0}"] == 0.0
    assert scraped["onthedot_run_lateness_seconds_bucket{le=300.0}"] == 1.0
    assert scraped["onthedot_oldest_due_run_age_seconds"] == 0.0
    assert scraped["onthedot_runs_finished_total{status=SUCCEEDED}"] == 1.0


async def test_metrics_server_of_a_role(rt: Runtime) -> None:
    rt.settings = rt.settings.model_copy(update={"metrics_port": 0})
    bound = await rt.serve_metrics()
    assert bound is not None
    host, port = bound
    assert host == "127.0.0.1"  # loopback unless ONTHEDOT_METRICS_HOST says otherwise
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
        answer = await http.get("/metrics")
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/plain")
        assert "onthedot_dead_letters 0.0" in answer.text
        assert "onthedot_oldest_due_run_age_seconds 0.0" in answer.text
        head = await http.head("/metrics")
        assert (head.status_code, head.content) == (200, b"")
        assert (await http.get("/")).status_code == 404
        assert (await http.post("/metrics")).status_code == 404
    await rt.close()
    # Closed with the runtime: nothing listens on the port any more.
    async with httpx.AsyncClient(timeout=5) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"http://127.0.0.1:{port}/metrics")


async def test_a_scrape_while_the_store_is_down_still_answers(
        client: httpx.AsyncClient, rt: Runtime, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    await client.post("/v1/jobs", json=job_body())

    async def down(cap: int) -> object:
        raise BackendError("connection refused")

    monkeypatch.setattr(rt.store, "runs_count_capped", down)
    with caplog.at_level(logging.WARNING, logger="onthedot"):
        answer = await client.get("/metrics")
    assert answer.status_code == 200
    assert "onthedot_jobs_created_total 1.0" in answer.text  # this process's counters
    assert any("shared state unreadable" in r.getMessage() for r in caplog.records)
