"""``ONTHEDOT_EGRESS_ALLOW`` entries with a port admit their host on that port alone; entries
without one keep admitting every port. Judged by the guard, at creation and on real loopback
connections at fire time."""

from __future__ import annotations

import pytest

from onthedot.actions.egress import EgressGuard, guarded_client
from onthedot.domain.errors import ConfigError, EgressRefusedError, ValidationError
from onthedot.domain.models import RunStatus
from tests.actions.conftest import FakeDns, RigFactory, Servers
from tests.actions.servers import answer

OK = {"/hook": answer(200, b'{"ok": true}', "application/json")}


@pytest.mark.parametrize(("entry", "host", "port"), [
    ("127.0.0.1:8080", "127.0.0.1", 8080),
    ("hooks.internal:8443", "hooks.internal", 8443),
    ("[::1]:8080", "::1", 8080),
    ("10.0.0.0/8:9000", "10.1.2.3", 9000),
    ("0x7f.1:8080", "127.0.0.1", 8080),  # any spelling of the address
])
async def test_an_entry_with_a_port_admits_that_port_alone(entry: str, host: str,
                                                           port: int) -> None:
    dns = FakeDns({"hooks.internal": ["10.1.2.3"]})
    guard = EgressGuard([entry], resolve=dns)
    assert await guard.check_host(host, port)
    with pytest.raises(EgressRefusedError):
        await guard.check_host(host, port + 1)
    assert guard.refusal_without_lookup(host, port) is None
    if host != "hooks.internal":  # of a name, only a lookup can tell
        assert guard.refusal_without_lookup(host, port + 1) is not None
    assert guard.refusal_without_lookup(host) is None  # the port not known yet


@pytest.mark.parametrize("entry", ["127.0.0.1", "::1", "[::1]", "hooks.internal",
                                   "10.0.0.0/8"])
async def test_an_entry_without_a_port_admits_every_port(entry: str) -> None:
    dns = FakeDns({"hooks.internal": ["10.1.2.3"]})
    guard = EgressGuard([entry], resolve=dns)
    host = {"[::1]": "::1", "10.0.0.0/8": "10.9.9.9"}.get(entry, entry)
    for port in (80, 443, 8080, 65535):
        assert await guard.check_host(host, port)


@pytest.mark.parametrize("entry", ["127.0.0.1:0", "127.0.0.1:65536", "host:http", "host:",
                                   "[::1]:x", "127.0.0.1:+80"])
def test_a_bad_port_stops_the_process(entry: str) -> None:
    with pytest.raises(ConfigError):
        EgressGuard([entry])


async def test_a_webhook_on_another_port_of_an_allowed_host_is_refused(
        make_rig: RigFactory, serve: Servers) -> None:
    allowed = serve(OK)
    other = serve(OK)
    rig = await make_rig(f"127.0.0.1:{allowed.port}")
    run = await rig.fire(await rig.create(allowed.url("/hook")))
    assert run.status is RunStatus.SUCCEEDED, run.error
    with pytest.raises(ValidationError) as refused:
        await rig.create(other.url("/hook"))
    assert refused.value.code == "egress_refused"

    # A name shows its address only at fire time: refused there, once, and never sent.
    dns = FakeDns({"hooks.example.test": ["127.0.0.1"]})
    guard = EgressGuard([f"127.0.0.1:{allowed.port}"], resolve=dns)
    by_name = await make_rig(http=guarded_client(guard))
    name = "hooks.example.test"
    good = await by_name.fire(await by_name.create(allowed.url("/hook", host=name)))
    bad = await by_name.fire(await by_name.create(other.url("/hook", host=name)))
    assert good.status is RunStatus.SUCCEEDED, good.error
    assert bad.status is RunStatus.FAILED
    assert bad.attempt == 1
    assert other.hits == []
