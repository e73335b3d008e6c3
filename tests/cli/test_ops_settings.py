"""The logging and metrics settings of the server roles, from the command line: a bad value or a
busy port is one line and exit code 2, like every other bad setting."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path

import pytest

from onthedot import logs
from tests.cli.test_cli import assert_one_line_error, run_cli


def test_unknown_log_format_is_one_line(capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONTHEDOT_LOG_FORMAT", "xml")
    code, _out, err = run_cli(capsys, "worker")
    assert_one_line_error(code, err, "ONTHEDOT_LOG_FORMAT")


def test_busy_metrics_port_is_one_line(capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        monkeypatch.setenv("ONTHEDOT_METRICS_PORT", str(port))
        code, _out, err = run_cli(capsys, "watcher", "--database-url",
                                  f"sqlite:///{tmp_path}/m.db")
    assert_one_line_error(code, err, f"cannot serve metrics on 127.0.0.1:{port}",
                          "metrics_port")


def test_json_line_carries_the_run_fields() -> None:
    record = logging.LogRecord("onthedot.worker", logging.WARNING, __file__, 1,
                               "run %s failed: %s", ("r-1", "HTTP 500 \u2014 \u53f0\u80a1"),
                               None)
    for key, value in {"job_id": "j-1", "run_id": "r-1", "attempt": 3,
                       "error": "HTTP 500 \u2014 \u53f0\u80a1"}.items():
        setattr(record, key, value)
    line = json.loads(logs.JsonFormatter().format(record))
    assert line["level"] == "WARNING"
    assert line["logger"] == "onthedot.worker"
    assert line["message"] == "run r-1 failed: HTTP 500 \u2014 \u53f0\u80a1"
    assert (line["job_id"], line["run_id"], line["attempt"]) == ("j-1", "r-1", 3)
    assert line["time"].endswith("Z")
    plain = json.loads(logs.JsonFormatter().format(logging.LogRecord(
        "onthedot", logging.INFO, __file__, 1, "onthedot stopped", (), None)))
    assert set(plain) == {"time", "level", "logger", "message"}  # no empty run fields


def test_quiet_loggers_stay_at_warning_even_at_debug() -> None:
    before = {name: logging.getLogger(name).level for name in ("httpcore", "httpx")}
    try:
        logs.configure("DEBUG", "text", "httpx, httpcore")
        assert logging.getLogger("httpcore").getEffectiveLevel() == logging.WARNING
        assert logging.getLogger("httpx").getEffectiveLevel() == logging.WARNING
    finally:
        for name, level in before.items():
            logging.getLogger(name).setLevel(level)
