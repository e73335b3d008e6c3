"""GET /v1/jobs answers with an ETag; sent back as If-None-Match, an unchanged page is a 304
without a body, and any change of a listed job gives a new ETag (the Tasks page's poll)."""

from __future__ import annotations

import httpx

from tests.api.conftest import job_body


async def test_an_unchanged_list_is_a_304(client: httpx.AsyncClient) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    first = await client.get("/v1/jobs")
    etag = first.headers["ETag"]
    assert first.status_code == 200
    assert [j["job_id"] for j in first.json()["jobs"]] == [job_id]

    same = await client.get("/v1/jobs", headers={"If-None-Match": etag})
    assert (same.status_code, same.content, same.headers["ETag"]) == (304, b"", etag)
    weak = await client.get("/v1/jobs", headers={"If-None-Match": f'"other", W/{etag}'})
    assert weak.status_code == 304

    await client.post(f"/v1/jobs/{job_id}:pause")
    changed = await client.get("/v1/jobs", headers={"If-None-Match": etag})
    assert changed.status_code == 200
    assert changed.headers["ETag"] != etag
    assert changed.json()["jobs"][0]["status"] == "paused"
    other_page = await client.get("/v1/jobs?status=scheduled",
                                  headers={"If-None-Match": changed.headers["ETag"]})
    assert (other_page.status_code, other_page.json()["jobs"]) == (200, [])
