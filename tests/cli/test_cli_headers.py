"""``onthedot jobs create --header``: a header the server refuses is one line, exit 2, naming
the header and not its value."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from onthedot.config import Settings
from tests.api.live import LiveServer, live_server
from tests.cli.test_cli import assert_one_line_error, run_cli


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with live_server(Settings(database_url=f"sqlite:///{tmp_path}/cli.db")) as live:
        yield live


@pytest.mark.parametrize(("header", "name"), [
    ("Host: evil.example", "Host"),
    ("Transfer-Encoding: chunked", "Transfer-Encoding"),
    ("X-Note: caf\u00e9-hush", "X-Note"),
    ("Authorization: Bearer a\rb-hush", "Authorization"),
])
def test_a_refused_header_is_one_line(capsys: pytest.CaptureFixture[str], server: LiveServer,
                                      header: str, name: str) -> None:
    code, _out, err = run_cli(capsys, "jobs", "create", "--now", "--webhook",
                              "https://example.com/h", "--header", header, "--url", server.url)
    assert_one_line_error(code, err, "422 invalid_header", f"action.headers.{name}")
    assert "hush" not in err
