"""``onthedot token create|list|revoke|rotate`` and ``onthedot jobs reassign``: administration
commands that talk to the database directly, checked against a live server on the same file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from onthedot.config import Settings
from tests.api.live import LiveServer, live_server
from tests.cli.test_cli import assert_one_line_error, run_cli


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/tokens.db"


@pytest.fixture
def server(db_url: str) -> Iterator[LiveServer]:
    with live_server(Settings(database_url=db_url)) as live:
        yield live


def status_with(server: LiveServer, secret: str | None, method: str = "GET",
                body: dict[str, object] | None = None) -> int:
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    return httpx.request(method, server.url + "/v1/jobs", headers=headers, json=body).status_code


def create(capsys: pytest.CaptureFixture[str], db_url: str, *args: str) -> tuple[str, str]:
    code, out, err = run_cli(capsys, "token", "create", *args, "--database-url", db_url)
    assert code == 0, err
    token_id = err.split("token ", 1)[1].split(" ", 1)[0]
    return out.strip(), token_id


def test_list_shows_ids_scopes_and_dates_never_a_secret(
        capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    reader, reader_id = create(capsys, db_url, "--user", "alice", "--scope", "read",
                               "--expires-in", "30d")
    writer, _ = create(capsys, db_url, "--user", "bob")

    code, out, err = run_cli(capsys, "token", "list", "--json", "--database-url", db_url)

    assert code == 0, err
    listed = json.loads(out)
    assert [(t["user"], t["scopes"], t["status"]) for t in listed] == [
        ("alice", ["read"], "active"), ("bob", ["write"], "active")]
    assert listed[0]["token_id"] == reader_id
    assert listed[0]["expires_at"] is not None
    assert listed[1]["expires_at"] is None
    code, table, _err = run_cli(capsys, "token", "list", "--database-url", db_url)
    assert table.splitlines()[0].split() == ["TOKEN_ID", "USER", "SCOPES", "CREATED",
                                             "EXPIRES", "LAST_USED", "STATUS"]
    for secret in (reader, writer):
        assert secret not in out
        assert secret not in table


def test_revoke_and_rotate_take_effect_on_the_next_request(
        capsys: pytest.CaptureFixture[str], db_url: str, server: LiveServer) -> None:
    secret, token_id = create(capsys, db_url, "--user", "alice")
    assert status_with(server, secret) == 200

    code, out, err = run_cli(capsys, "token", "rotate", token_id, "--database-url", db_url)

    assert code == 0, err
    new_secret = out.strip()
    assert new_secret.startswith("otd_")
    assert new_secret != secret
    assert status_with(server, secret) == 401
    assert status_with(server, new_secret) == 200
    code, out, err = run_cli(capsys, "token", "revoke", token_id, "--database-url", db_url)
    assert code == 0, err
    assert out.strip() == f"token {token_id} revoked"
    assert status_with(server, new_secret) == 401
    code, _out, err = run_cli(capsys, "token", "revoke", token_id, "--database-url", db_url)
    assert_one_line_error(code, err, f"no token {token_id}")


def test_a_read_only_token_gets_403_on_writes(capsys: pytest.CaptureFixture[str],
                                              db_url: str, server: LiveServer) -> None:
    reader, _ = create(capsys, db_url, "--user", "alice", "--scope", "read")

    assert status_with(server, reader) == 200
    assert status_with(server, reader, "POST", {"action": {"type": "message", "text": "hi"},
                                                "job_params": {"type": "immediate"}}) == 403


def test_the_first_token_tells_about_local_jobs_and_reassign_moves_them(
        capsys: pytest.CaptureFixture[str], db_url: str, server: LiveServer) -> None:
    url = ["--url", server.url]
    for text in ("one", "two"):
        code, _out, err = run_cli(capsys, "jobs", "create", "--now", "--message", text, *url)
        assert code == 0, err

    secret, _ = create(capsys, db_url, "--user", "alice")
    code, _out, err = run_cli(capsys, "token", "create", "--user", "bob",
                              "--database-url", db_url)

    assert code == 0
    assert "note" not in err  # only the first token says it
    code, out, err = run_cli(capsys, "jobs", "reassign", "--from", "local", "--to", "alice",
                             "--database-url", db_url)
    assert code == 0, err
    assert out.strip() == "moved 2 job(s) from 'local' to 'alice'"
    code, out, err = run_cli(capsys, "jobs", "list", "--json", "--token", secret, *url)
    assert code == 0, err
    assert sorted(j["name"] for j in json.loads(out)["jobs"]) == ["one", "two"]


def test_the_note_names_both_ways_to_keep_local_jobs(capsys: pytest.CaptureFixture[str],
                                                     db_url: str, server: LiveServer) -> None:
    run_cli(capsys, "jobs", "create", "--now", "--message", "hi", "--url", server.url)

    code, _out, err = run_cli(capsys, "token", "create", "--user", "alice",
                              "--database-url", db_url)

    assert code == 0
    assert "note: 1 job(s) on this database belong to the user 'local'" in err
    assert "--user local" in err
    assert "onthedot jobs reassign --from local --to alice" in err


@pytest.mark.parametrize(("args", "fragment"), [
    (["token", "create", "--user", "a", "--expires-in", "3x"], "not a duration"),
    (["token", "create", "--user", "a", "--expires-at", "2001-01-01T00:00:00Z"],
     "not in the future"),
    (["token", "create", "--user", "a", "--expires-in", "1d", "--expires-at",
      "2999-01-01T00:00:00Z"], "not both"),
    (["token", "create", "--user", "a", "--scope", "root"], "root"),
    (["token", "rotate", "tok_nope"], "no token tok_nope"),
    (["jobs", "reassign", "--from", "local", "--to", "local"], "same user"),
    (["jobs", "reassign", "--from", "local", "--to", "bad name!"], "invalid user name"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], db_url: str,
                                          args: list[str], fragment: str) -> None:
    code, _out, err = run_cli(capsys, *args, "--database-url", db_url)

    assert_one_line_error(code, err, fragment)
