"""``onthedot jobs import FILE.jsonl`` against a real server: batches, a line per refused job,
a summary; a file that cannot be read or holds a line that is not a JSON object is one line and
exit 2, before anything is sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.config import Settings
from tests.api.live import LiveServer, live_server
from tests.cli.test_cli import assert_one_line_error, closed_port, run_cli


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with live_server(Settings(database_url=f"sqlite:///{tmp_path}/import.db")) as live:
        yield live


def job(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "action": {"type": "message", "text": name},
            "job_params": {"type": "recurring", "schedule": "0 8 * * *",
                           "timezone": "Asia/Taipei"}, **extra}


def write_lines(path: Path, *lines: Any) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines),
                    encoding="utf-8")
    return path


def stored_names(server: LiveServer) -> list[str]:
    jobs = httpx.get(f"{server.url}/v1/jobs", params={"page_size": 100}).json()["jobs"]
    return sorted(j["name"] for j in jobs)


def test_import_reports_each_refused_line_and_a_summary(
        capsys: pytest.CaptureFixture[str], server: LiveServer, tmp_path: Path) -> None:
    taken = httpx.post(f"{server.url}/v1/jobs", json=job("first tea"),
                       headers={"Idempotency-Key": "tea"})
    assert taken.status_code == 201
    path = write_lines(
        tmp_path / "jobs.jsonl",
        job("a"),
        job("b", job_params={"type": "recurring", "schedule": "99 8 * * *"}),
        "",
        job("first tea", idempotency_key="tea"),  # the same job again: already there
        job("c", idempotency_key="tea"),  # the key of another job: refused
        job("d", shedule="x"),
        job("e"),
    )

    code, out, err = run_cli(capsys, "jobs", "import", str(path), "--batch-size", "2",
                             "--url", server.url)

    assert code == 1, err
    assert out.strip() == (f"6 jobs in {path}: 2 created, 1 already there (same idempotency "
                           "key), 3 refused")
    refused = err.strip().splitlines()
    assert len(refused) == 3, err
    assert refused[0].startswith("line 2: invalid cron expression '99 8 * * *'")
    assert "[422 invalid_schedule] (field job_params.schedule; expected" in refused[0]
    assert refused[1].startswith("line 5: this Idempotency-Key was already used")
    assert "[409 idempotency_key_reused] (field idempotency_key;" in refused[1]
    assert refused[2].startswith("line 6: unknown field 'shedule'")
    assert "(field shedule;" in refused[2]
    assert stored_names(server) == ["a", "e", "first tea"]


def test_a_prefix_makes_importing_again_create_nothing_twice(
        capsys: pytest.CaptureFixture[str], server: LiveServer, tmp_path: Path) -> None:
    lines = [job(f"job {n:04}") for n in range(1001)]  # two requests of the default size
    lines[7] = job("own key", idempotency_key="mine")
    path = write_lines(tmp_path / "many.jsonl", *lines)
    args = ["jobs", "import", str(path), "--idempotency-prefix", "nightly", "--url", server.url]

    first = run_cli(capsys, *args)
    again = run_cli(capsys, *args)

    assert first[:2] == (0, f"1001 jobs in {path}: 1001 created, 0 already there (same "
                            "idempotency key), 0 refused\n")
    assert again[:2] == (0, f"1001 jobs in {path}: 0 created, 1001 already there (same "
                            "idempotency key), 0 refused\n")
    replay = httpx.post(f"{server.url}/v1/jobs", json=job("job 0003"),
                        headers={"Idempotency-Key": "nightly:4"})  # line 4 is job 0003
    assert replay.status_code == 200
    mine = httpx.post(f"{server.url}/v1/jobs", json=job("own key"),
                      headers={"Idempotency-Key": "mine"})
    assert mine.status_code == 200


@pytest.mark.parametrize(("tail", "line", "why"), [
    (b'{"name": "ok"}\n{"name": \n', 3, "not valid JSON"),
    (b'{"name": "ok"}\n\n[1, 2]\n', 4, "expected a JSON object"),
    (b'{"timeout_seconds": NaN}\n', 2, "not valid JSON: NaN is not a JSON number"),
    (b'{"name": "caf\xe9"}\n', 2, "not valid JSON: not UTF-8"),
])
def test_a_line_that_is_not_a_job_stops_before_anything_is_sent(
        capsys: pytest.CaptureFixture[str], server: LiveServer, tmp_path: Path,
        tail: bytes, line: int, why: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(json.dumps(job("a good first line")).encode() + b"\n" + tail)

    code, _out, err = run_cli(capsys, "jobs", "import", str(path), "--url", server.url)

    assert_one_line_error(code, err, f"{path}, line {line}: {why}")
    assert stored_names(server) == []


def test_a_file_that_cannot_be_read_is_one_line(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    code, _out, err = run_cli(capsys, "jobs", "import", str(tmp_path / "missing.jsonl"))
    assert_one_line_error(code, err, "cannot read", "missing.jsonl", "No such file")


def test_a_server_that_is_not_there_is_one_line(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    path = write_lines(tmp_path / "jobs.jsonl", job("a"), job("b"))
    url = f"http://127.0.0.1:{closed_port()}"
    code, _out, err = run_cli(capsys, "jobs", "import", str(path), "--url", url)
    assert_one_line_error(code, err, "lines 1-2 were not imported", "cannot connect")
