"""No schedule can freeze the server: over a real socket, a pathological schedule is a quick
422 ``schedule_too_complex`` while other requests keep their latency."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from onthedot.config import Settings
from tests.api.conftest import assert_problem, job_body
from tests.api.live import LiveServer, live_server

# Generous for a loaded 2-core CI machine: the budget is a fraction of a second of steps and a
# refusal by the caps takes milliseconds.
ANSWERED = 2.0
PROMPT = 0.5  # seconds for a request that has nothing to do with the schedules in flight
IN_FLIGHT = 4


def vevent(*rules: str) -> str:
    return "\n".join(
        ["BEGIN:VEVENT", "DTSTART:20260622T000000Z", *[f"RRULE:{r}" for r in rules], "END:VEVENT"]
    )


# The report: 20 rules that never match (1.1 KB; 46 s on the event loop before).
NEVER_MATCHING = vevent(
    *[f"FREQ=YEARLY;BYWEEKNO={20 + i};BYMONTH=12;BYMONTHDAY=1" for i in range(20)])
# Within every cap, but about ten times the validation budget of work: each rule runs to 9999.
EXPENSIVE = vevent(*[f"FREQ=YEARLY;BYMONTH={m};COUNT=10000" for m in range(1, 11)])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/limits.db")
    with live_server(settings) as live:
        yield live


def create(http: httpx.Client, schedule: str) -> tuple[httpx.Response, float]:
    began = time.perf_counter()
    response = http.post("/v1/jobs", json=job_body(job_params={
        "type": "recurring", "schedule": schedule, "timezone": "UTC"}))
    return response, time.perf_counter() - began


@pytest.mark.parametrize("schedule", [NEVER_MATCHING, EXPENSIVE], ids=["capped", "budget"])
def test_a_pathological_vevent_is_a_quick_422(server: LiveServer, schedule: str) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        response, elapsed = create(http, schedule)
        body = assert_problem(response, 422, "schedule_too_complex", "job_params.schedule")
        assert "RRULE" in body["expected"]
        assert elapsed < ANSWERED
        assert http.get("/v1/jobs").json()["jobs"] == []  # nothing half-written


def test_other_requests_keep_their_latency_while_pathological_ones_are_in_flight(
    server: LiveServer,
) -> None:
    done = threading.Event()
    health: list[float] = []

    def probe() -> None:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            while not done.is_set():
                began = time.perf_counter()
                assert http.get("/healthz").status_code == 200
                health.append(time.perf_counter() - began)
                time.sleep(0.02)

    def pathological() -> tuple[httpx.Response, float]:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            return create(http, EXPENSIVE)

    prober = threading.Thread(target=probe, name="healthz-probe")
    prober.start()
    try:
        with ThreadPoolExecutor(IN_FLIGHT) as pool:
            flood = [pool.submit(pathological) for _ in range(IN_FLIGHT)]
            with httpx.Client(base_url=server.url, timeout=30) as http:
                # Ordinary creates in the middle of the flood compile inline and are not
                # queued behind the expensive ones.
                time.sleep(0.2)
                ordinary = [create(http, f"{minute} 8 * * *") for minute in range(20)]
                ordinary += [create(http, f"FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE={minute}")
                             for minute in range(20)]
            results = [future.result() for future in flood]
    finally:
        done.set()
        prober.join()
    for response, elapsed in ordinary:
        assert response.status_code == 201, response.text
        assert elapsed < PROMPT, sorted(e for _, e in ordinary)[-5:]
    for response, elapsed in results:
        assert_problem(response, 422, "schedule_too_complex", "job_params.schedule")
        # They take turns in the schedule thread, one budget each.
        assert elapsed < IN_FLIGHT * ANSWERED
    assert len(health) >= 10
    assert max(health) < PROMPT, sorted(health)[-5:]


@pytest.mark.parametrize(("time_", "timezone"), [
    ("9999-12-31T23:59:59-14:00", "UTC"),
    ("0001-01-01T00:00:00+14:00", "UTC"),
    ("9999-12-31T23:00", "America/New_York"),
])
def test_a_one_time_time_that_overflows_is_a_422(server: LiveServer, time_: str,
                                                 timezone: str) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        response = http.post("/v1/jobs", json=job_body(job_params={
            "type": "one-time", "time": time_, "timezone": timezone}))
        assert_problem(response, 422, "invalid_time", "job_params.time")
