"""A deployment configured for PostgreSQL or NATS on an install without that extra gets one line
saying what to install (exit 2), not a ModuleNotFoundError traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Runs the real CLI with the extra's packages made unimportable, as on `pip install onthedot`.
WITHOUT = ("import sys\n"
           "for name in {blocked!r}: sys.modules[name] = None\n"
           "from onthedot.cli import main\n"
           "sys.argv = ['onthedot', *sys.argv[1:]]\n"
           "sys.exit(main())\n")


def run_without(blocked: list[str], *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT.format(blocked=blocked), *args],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, **{f"ONTHEDOT_{k.upper()}": v for k, v in env.items()}})


@pytest.mark.parametrize(("blocked", "settings", "extra"), [
    (["psycopg", "psycopg_pool"], {"database_url": "postgresql://postgres@127.0.0.1:5432/test"},
     "postgres"),
    (["nats"], {"queue_url": "nats://127.0.0.1:4222"}, "nats"),
])
def test_a_missing_extra_names_what_to_install(tmp_path: object, blocked: list[str],
                                               settings: dict[str, str], extra: str) -> None:
    settings.setdefault("database_url", f"sqlite:///{tmp_path}/x.db")
    done = run_without(blocked, "migrate", **settings)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert f"pip install 'onthedot[{extra}]'" in line
