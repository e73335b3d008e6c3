"""A credential sent in the query string is refused, and the access log does not keep it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from onthedot.api.auth import redact_request_target
from tests.api.test_connections import running_api
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow
SECRETS = ["otd_QueryTokenHush123", "access-hush-4567", "key-hush-8901", "pw-hush-2345",
           "otd_PathTokenHush678"]


def test_query_credentials_are_not_written_to_the_access_log(tmp_path: Path) -> None:
    with running_api(tmp_path, access_log="true") as api:
        base = f"http://127.0.0.1:{api.port}"
        targets = [
            f"/v1/jobs?token={SECRETS[0]}&page_size=5",
            f"/v1/jobs?access_token={SECRETS[1]}&X-Api-Key={SECRETS[2]}",
            f"/healthz?Password={SECRETS[3]}",
            f"/v1/jobs/{SECRETS[4]}",
            "/v1/jobs?page_token=cursor-kept&page_size=2",
        ]
        for target in targets:
            httpx.get(base + target, timeout=10)
        wait_until(lambda: "cursor-kept" in api.log(), 10, "the access log lines")
        log = api.log()
    for secret in SECRETS:
        assert secret not in log, log
    assert "token=***&page_size=5" in log
    assert "page_token=cursor-kept" in log  # a pagination cursor is not a credential


@pytest.mark.parametrize(("target", "shown"), [
    ("/v1/jobs?token=abc", "/v1/jobs?token=***"),
    ("/v1/jobs?page_size=5&api_key=k;secret=s&q", "/v1/jobs?page_size=5&api_key=***;secret=***&q"),
    ("/x?my%5Ftoken=abc&empty_token=", "/x?my%5Ftoken=***&empty_token=***"),
    ("/x?note=otd_abc-def", "/x?note=otd_***"),
    ("/x?page_token=c1&next_page_token=c2", "/x?page_token=c1&next_page_token=c2"),
    ("/plain", "/plain"),
])
def test_redaction_of_a_request_target(target: str, shown: str) -> None:
    assert redact_request_target(target) == shown
