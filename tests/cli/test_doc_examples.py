"""The shell examples of the README and docs/cli.md run as written, against a real server, on
any system: no GNU-only `date -d`, no absolute dates that pass, and every RRULE that names an
hour also names its minute (a bare rule takes the missing minute from the creation time)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from onthedot.config import Settings
from tests.api.live import LiveServer, live_server

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = [ROOT / "README.md", ROOT / "docs" / "cli.md"]
# Blocks about installing, configuring or starting servers: nothing to run against a test server.
NOT_RUN = ("pip install", "export ", "python -m pytest", "onthedot serve", "onthedot migrate")
SH_BLOCK = re.compile(r"```sh\n(.*?)```", re.DOTALL)
RULE = re.compile(r"FREQ=[^\s'\"`|)]*")


def shell_blocks(path: Path) -> list[str]:
    return [b for b in SH_BLOCK.findall(path.read_text(encoding="utf-8"))
            if not any(marker in b for marker in NOT_RUN)]


def test_no_gnu_only_date_in_the_docs() -> None:
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\$\(date\b[^)]*\s-d\b", text), f"{path.name}: GNU-only date -d"


def test_every_rrule_with_an_hour_says_its_minute() -> None:
    for path in DOCS:
        for rule in RULE.findall(path.read_text(encoding="utf-8")):
            if "BYHOUR" in rule:
                assert "BYMINUTE" in rule, f"{path.name}: {rule} fires at the creation minute"


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[LiveServer]:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/docs.db", tick_seconds=0.2)
    with live_server(settings, roles=("watcher", "worker")) as live:
        yield live


@pytest.mark.skipif(shutil.which("curl") is None or shutil.which("bash") is None,
                    reason="the examples are curl and bash")
@pytest.mark.parametrize("doc", RUNNABLE, ids=lambda p: p.name)
def test_the_shell_examples_run(doc: Path, engine: LiveServer, tmp_path: Path) -> None:
    blocks = shell_blocks(doc)
    assert blocks, f"no runnable examples found in {doc.name}"
    (tmp_path / "payload.json").write_text('{"topic": "finance"}', encoding="utf-8")
    host_port = engine.url.removeprefix("http://")
    # `onthedot` is this checkout's CLI; curl fails on an HTTP error instead of printing it;
    # <job_id> placeholders stand for a job made first.
    prelude = f"""set -euo pipefail
onthedot() {{ "{sys.executable}" -m onthedot.cli "$@"; }}
curl() {{ command curl --fail-with-body "$@"; }}
EXAMPLE_JOB=$(onthedot jobs create --name example --cron '0 8 * * *' --message hi -q)
"""
    # One script per document: a later example may use what an earlier one made ($JOB).
    examples = "\n".join(blocks).replace("localhost:8080", host_port)
    proc = subprocess.run(["bash", "-c", prelude + examples.replace("<job_id>", "$EXAMPLE_JOB")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ONTHEDOT_URL": engine.url,
                               "ONTHEDOT_LOG_LEVEL": "WARNING"})
    assert proc.returncode == 0, f"{doc.name} examples failed:\n{proc.stdout}\n{proc.stderr}"
    assert "error" not in proc.stderr.lower(), proc.stderr
