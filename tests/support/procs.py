"""Run onthedot roles as real OS processes, so tests can SIGKILL, SIGSTOP and SIGTERM them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROLE_MAIN = """
import asyncio, logging, sys
from onthedot.config import Settings
from onthedot.runtime import serve_roles
logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                    format="%(asctime)s %(name)s %(levelname)s %(message)s")
logging.getLogger("httpx").setLevel(logging.WARNING)
asyncio.run(serve_roles(Settings(), sys.argv[1].split(",")))
"""


@dataclass
class RoleProcess:
    roles: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def terminate(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def alive(self) -> bool:
        return self.proc.poll() is None


def start_roles(roles: str, tmp_path: Path, name: str, **settings: object) -> RoleProcess:
    env = {**os.environ, **{f"ONTHEDOT_{k.upper()}": str(v) for k, v in settings.items()}}
    log_path = tmp_path / f"{name}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-c", ROLE_MAIN, roles], env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    return RoleProcess(roles=roles, proc=proc, log_path=log_path)
