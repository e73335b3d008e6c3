"""Every ``--help`` of the CLI says what the code does (issue 18 §4: ``--workers`` said 16 where
the setting is 256, ``--queue-url`` named SQLite on PostgreSQL).

* Every command's ``--help`` answers (exit 0).
* An option that names its variable (``[env ONTHEDOT_X]``) is the setting ``x`` of config.py,
  under its own name, and a default it quotes is that setting's default.
* The job options quote the domain model's defaults; on ``jobs update`` they quote none (a
  left-out option keeps the job's own value).
* docs/cli.md quotes the same defaults for the server flags.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from onthedot.cli import cli
from onthedot.config import Settings
from onthedot.domain.models import Job, RetryPolicy

DOCS = Path(__file__).resolve().parents[2] / "docs"
ENV = re.compile(r"\[env (ONTHEDOT_[A-Z_]+)\]")
QUOTED_DEFAULT = re.compile(r"\(default ([^);\s]+)")


def commands(group: click.Command = cli, path: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], click.Command]]:
    if isinstance(group, click.Group):
        for name, sub in sorted(group.commands.items()):
            yield from commands(sub, (*path, name))
    else:
        yield path, group


def options() -> Iterator[tuple[str, click.Option]]:
    for path, command in commands():
        for param in command.params:
            if isinstance(param, click.Option):
                yield " ".join(path), param


ALL_COMMANDS = [" ".join(path) for path, _ in commands()]


@pytest.mark.parametrize("command", ALL_COMMANDS)
def test_every_help_answers(command: str) -> None:
    result = CliRunner().invoke(cli, [*command.split(), "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage: " in result.output


def test_options_that_name_a_variable_quote_its_default() -> None:
    checked = 0
    for command, option in options():
        named = ENV.search(option.help or "")
        if named is None:
            continue
        field = named.group(1).removeprefix("ONTHEDOT_").lower()
        assert field in Settings.model_fields, (command, option.opts, field)
        assert option.name == field, (command, option.opts, "flag and variable differ")
        quoted = QUOTED_DEFAULT.search(option.help or "")
        default = Settings.model_fields[field].default
        if default is None:
            assert quoted is None, (command, option.opts, "quotes a default the setting lacks")
            continue
        assert quoted is not None, (command, option.opts, f"does not quote {default!r}")
        assert quoted.group(1) == str(default), (command, option.opts, option.help)
        checked += 1
    assert checked >= 10  # serve, api and worker --workers/--host/--port, every --database-url


def test_the_queue_url_help_names_both_databases() -> None:
    for command, option in options():
        if option.name == "queue_url":
            assert "SQLite or PostgreSQL" in (option.help or ""), command


def help_of(command: str, flag: str) -> str:
    for name, option in options():
        if name == command and flag in option.opts:
            return option.help or ""
    raise AssertionError(f"{command} has no {flag}")


def test_job_options_quote_the_models_defaults() -> None:
    assert f"default {RetryPolicy().max_attempts - 1})" in help_of("jobs create", "--retries")
    assert f"(default {Job.timeout_seconds:g})" in help_of("jobs create", "--timeout")
    assert f"(default {Job.misfire_policy})" in help_of("jobs create", "--misfire")
    for flag in ("--retries", "--timeout", "--misfire"):
        assert "default" not in help_of("jobs update", flag)
        assert "unchanged when left out" in help_of("jobs update", flag)


def test_cli_doc_quotes_the_settings_defaults() -> None:
    text = (DOCS / "cli.md").read_text()
    for flag, field in (("--database-url", "database_url"), ("--host", "host"),
                        ("--port", "port"), ("--workers", "workers")):
        default = Settings.model_fields[field].default
        assert re.search(rf"`{flag}`[^`]*\(`{re.escape(str(default))}`", text), flag
    for variable, field in (("ONTHEDOT_SHUTDOWN_GRACE", "shutdown_grace"),):
        default = Settings.model_fields[field].default
        assert re.search(rf"`{variable}` seconds \({default:g}\)", text), variable
