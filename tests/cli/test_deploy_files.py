"""docker-compose.yml and the Dockerfile, checked as far as a machine without a container engine
allows (issue 18 §4): the worker's ``environment:`` used to replace the shared block (losing the
visibility timeout and every later setting), and the image ran as ``nobody`` in a root-owned
``/app`` where ``serve`` wanted to create its SQLite file.

* Every role's EFFECTIVE environment (anchors and merge keys resolved) holds every shared
  setting with its value, JSON logs and a metrics endpoint reachable from outside the
  container; every variable is a setting of config.py with a valid value.
* Every service command is a real ``onthedot`` command line (its options parse).
* When ``docker-compose`` (v1, ``apt-get install docker-compose``) or ``docker compose`` is
  installed, its own ``config`` (which resolves the file without an engine) must agree.
* The Dockerfile: a non-root user, a data directory owned by that user, and the default
  database URL inside it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

from onthedot.cli import cli
from onthedot.config import Settings
from onthedot.runtime import ROLES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
SHARED = "x-onthedot-env"
IMAGE_SERVICES = ("migrate", "api", *ROLES)  # the services that run our image


def compose_file() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())  # resolves anchors and << merge keys
    assert isinstance(loaded, dict)
    return loaded


def compose_tool() -> list[str] | None:
    """A compose implementation that resolves the file without an engine, if installed."""
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(
            ["docker", "compose", "version"], capture_output=True, check=False).returncode == 0:
        return ["docker", "compose"]
    return None


def resolved_by_tool() -> dict[str, Any] | None:
    tool = compose_tool()
    if tool is None:
        return None
    done = subprocess.run([*tool, "-f", str(COMPOSE), "config"], capture_output=True,
                          text=True, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    loaded = yaml.safe_load(done.stdout)
    assert isinstance(loaded, dict)
    return loaded


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # the KEY=VALUE list form
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def check_services(services: dict[str, Any], shared: dict[str, str]) -> None:
    assert set(IMAGE_SERVICES) <= set(services), sorted(services)
    for name in IMAGE_SERVICES:
        env = environment(services[name])
        missing = {k: v for k, v in shared.items() if env.get(k) != v}
        assert not missing, f"{name} lacks or changes the shared settings {missing}"
        assert env["ONTHEDOT_LOG_FORMAT"] == "json", name
        assert env["ONTHEDOT_METRICS_HOST"] == "0.0.0.0", name  # scraped from another container
        assert int(env["ONTHEDOT_METRICS_PORT"]) > 0, name
        settings_of(env)  # every variable is a setting, with a valid value


def settings_of(env: dict[str, str]) -> Settings:
    fields = {}
    for key, value in env.items():
        assert key.startswith("ONTHEDOT_"), key
        field = key.removeprefix("ONTHEDOT_").lower()
        assert field in Settings.model_fields, f"{key} is no setting of config.py"
        fields[field] = value
    return Settings(**fields)


def shared_settings(loaded: dict[str, Any]) -> dict[str, str]:
    shared = loaded[SHARED]
    assert isinstance(shared, dict)
    return {str(k): str(v) for k, v in shared.items()}


def test_every_role_gets_the_whole_shared_environment() -> None:
    loaded = compose_file()
    shared = shared_settings(loaded)
    assert "ONTHEDOT_VISIBILITY_TIMEOUT" in shared
    check_services(loaded["services"], shared)
    # A role's own settings come on top of the shared ones, never instead of them.
    assert environment(loaded["services"]["worker"])["ONTHEDOT_WORKERS"] == "64"


def test_the_compose_tool_resolves_the_file_the_same_way() -> None:
    resolved = resolved_by_tool()
    if resolved is None:
        pytest.skip("no docker-compose or docker compose installed")
    check_services(resolved["services"], shared_settings(compose_file()))


def command_parses(args: list[str]) -> click.Command:
    """Parse ``onthedot ARGS`` down to its command, as the entry point would; fails for an
    unknown command and raises a usage error for an unknown or malformed option."""
    command: click.Command = cli
    rest = list(args)
    while isinstance(command, click.Group):
        assert rest, f"{args} names no command"
        assert rest[0] in command.commands, f"no command {rest[0]!r} in {args}"
        command, rest = command.commands[rest[0]], rest[1:]
    command.make_context(command.name or "", rest)
    return command


@pytest.mark.parametrize("name", IMAGE_SERVICES)
def test_every_service_runs_a_real_command(name: str) -> None:
    args = [str(a) for a in compose_file()["services"][name]["command"]]
    command = command_parses(args)
    assert command.name == args[0]
    helped = CliRunner().invoke(cli, [args[0], "--help"])
    assert helped.exit_code == 0, helped.output


def test_the_token_hint_of_the_compose_file_is_a_real_command() -> None:
    hint = re.search(r"docker compose run --rm (\w+) (token create .*)", COMPOSE.read_text())
    assert hint is not None
    assert hint.group(1) in compose_file()["services"]
    assert command_parses(hint.group(2).split()).name == "create"


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of each instruction, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and not ln.strip().startswith("#")]
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1]) for ln in lines]


def test_the_image_runs_as_a_user_that_owns_its_data_directory() -> None:
    steps = dockerfile()
    users = [args for op, args in steps if op == "USER"]
    assert users, "no USER: the image would run as root"
    user = users[-1].strip()
    assert user.split(":")[0] not in ("root", "0")
    env = dict(re.findall(r"(\w+)=(\S+)", " ".join(a for op, a in steps if op == "ENV")))
    url = env["ONTHEDOT_DATABASE_URL"]
    assert url.startswith("sqlite:////"), url  # an absolute path, whatever the working dir
    data_dir = str(Path(url.removeprefix("sqlite:///")).parent)
    runs = " && ".join(a for op, a in steps if op == "RUN")
    assert re.search(rf"mkdir (-p )?{re.escape(data_dir)}\b", runs), runs
    owner = re.search(rf"chown (\S+) {re.escape(data_dir)}\b", runs)
    assert owner is not None, f"{data_dir} is not given to the runtime user"
    assert owner.group(1) == user, (owner.group(1), user)
    volumes = " ".join(a for op, a in steps if op == "VOLUME")
    assert data_dir in volumes
    workdirs = [a.strip() for op, a in steps if op == "WORKDIR"]
    assert workdirs[-1] == data_dir  # anything else written relative to it is writable too
    # USER comes after every RUN: the install and the chown run as root, the service does not.
    last_run = max(i for i, (op, _) in enumerate(steps) if op == "RUN")
    assert max(i for i, (op, _) in enumerate(steps) if op == "USER") > last_run
    entry = [a for op, a in steps if op == "ENTRYPOINT"][-1]
    assert entry.strip() == '["onthedot"]'
    cmd = yaml.safe_load([a for op, a in steps if op == "CMD"][-1])
    assert command_parses(cmd).name == "serve"
