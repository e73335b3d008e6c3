"""The egress guard's judgement of hosts: every spelling of a refused address, names that DNS
resolves into refused ranges, and what the allowlist admits."""

from __future__ import annotations

import httpx
import pytest

from onthedot.actions.egress import EgressGuard, parse_ip_literal
from onthedot.config import Settings, load_settings
from onthedot.domain.errors import ConfigError, EgressRefusedError
from tests.actions.conftest import LITERAL_REFUSALS, FakeDns


def _host(url: str) -> str:
    return httpx.URL(url).raw_host.decode()


@pytest.mark.parametrize(("url", "reason"), LITERAL_REFUSALS)
async def test_every_spelling_is_refused_without_asking_dns(url: str, reason: str) -> None:
    dns = FakeDns({})
    guard = EgressGuard(resolve=dns)
    assert guard.refusal_without_lookup(_host(url)) == reason
    with pytest.raises(EgressRefusedError) as caught:
        await guard.check_host(_host(url), 80)
    assert f"({reason} address)" in caught.value.message
    assert caught.value.retryable is False
    assert dns.asked == []


@pytest.mark.parametrize(("host", "expected"), [
    ("2130706433", "127.0.0.1"), ("0x7f.1", "127.0.0.1"), ("017700000001", "127.0.0.1"),
    ("0x7F.0.0.1", "127.0.0.1"), ("10.0x1.0377", "10.1.0.255"), ("0", "0.0.0.0"),
    ("8.8.8.8.", "8.8.8.8"), ("::ffff:a9fe:a9fe", "::ffff:169.254.169.254"),
    ("example.com", None), ("1.2.3.4.5", None), ("08.0.0.1", None), ("256.0.0.1", None),
    ("1.2.65536", None), ("0x", "0.0.0.0"), ("4294967296", None),
])
def test_ip_literals_are_read_in_every_spelling_a_resolver_accepts(host: str,
                                                                   expected: str | None) -> None:
    address = parse_ip_literal(host)
    assert (None if address is None else address.compressed) == (
        None if expected is None else parse_ip_literal(expected).compressed)  # type: ignore[union-attr]


@pytest.mark.parametrize("host", ["8.8.8.8", "2001:4860:4860::8888", "::ffff:8.8.8.8",
                                  "64:ff9b::808:808", "2002:808:808::1", "1.1.1.1"])
async def test_public_addresses_pass_and_are_connected_to_as_written(host: str) -> None:
    dns = FakeDns({})
    guard = EgressGuard(resolve=dns)
    assert guard.refusal_without_lookup(host) is None
    assert await guard.check_host(host, 443) == [parse_ip_literal(host).compressed]  # type: ignore[union-attr]
    assert dns.asked == []


@pytest.mark.parametrize(("answer", "reason"), [
    (["127.0.0.1"], "loopback"), (["10.0.0.7"], "private"), (["169.254.169.254"], "cloud metadata"),
    (["::1"], "loopback"), (["fd12::1"], "unique-local"),
    (["93.184.215.14", "192.168.0.10"], "private"),  # one bad address among good ones is enough
])
async def test_a_name_resolving_to_a_refused_address_is_refused(answer: list[str],
                                                                reason: str) -> None:
    dns = FakeDns({"hooks.example.com": answer})
    guard = EgressGuard(resolve=dns)
    assert guard.refusal_without_lookup("hooks.example.com") is None  # only DNS can tell
    with pytest.raises(EgressRefusedError) as caught:
        await guard.check_host("hooks.example.com", 443)
    assert f"({reason} address)" in caught.value.message
    assert "ONTHEDOT_EGRESS_ALLOW" in caught.value.message
    # The user is told the kind of address, not which internal address the name has.
    assert all(address not in caught.value.message for address in answer)


async def test_a_public_name_returns_the_checked_addresses() -> None:
    dns = FakeDns({"hooks.example.com": ["93.184.215.14", "2606:2800:21f::1"]})
    guard = EgressGuard(resolve=dns)
    assert await guard.check_host("Hooks.Example.COM.", 443) == dns.answers["hooks.example.com"]
    assert dns.asked == ["hooks.example.com"]


async def test_an_unresolvable_name_is_a_retryable_error() -> None:
    guard = EgressGuard(resolve=FakeDns({}))
    with pytest.raises(Exception) as caught:
        await guard.check_host("nowhere.example.com", 443)
    assert not isinstance(caught.value, EgressRefusedError)
    assert getattr(caught.value, "retryable", None) is True
    assert "could not resolve nowhere.example.com" in str(caught.value)


async def test_the_allowlist_admits_names_and_cidrs() -> None:
    dns = FakeDns({"hooks.internal": ["10.1.2.3"], "other.internal": ["10.9.9.9"],
                   "db.corp": ["192.168.5.5"]})
    guard = EgressGuard(["hooks.internal", "192.168.0.0/16", "127.0.0.1", "localhost"],
                        resolve=dns)
    assert await guard.check_host("hooks.internal", 80) == ["10.1.2.3"]  # by name
    assert await guard.check_host("db.corp", 80) == ["192.168.5.5"]  # by CIDR
    assert await guard.check_host("192.168.77.1", 80) == ["192.168.77.1"]
    assert await guard.check_host("2130706433", 80) == ["127.0.0.1"]  # any spelling
    assert await guard.check_host("::ffff:127.0.0.1", 80) == ["::ffff:7f00:1"]
    assert guard.refusal_without_lookup("localhost") is None
    with pytest.raises(EgressRefusedError):
        await guard.check_host("other.internal", 80)  # another name in a refused range
    with pytest.raises(EgressRefusedError):
        await guard.check_host("127.0.0.2", 80)  # 127.0.0.1 was allowed, not all of loopback
    with pytest.raises(EgressRefusedError):
        await guard.check_host("app.localhost", 80)  # an allowed name does not admit subnames


async def test_a_range_around_a_metadata_address_does_not_admit_it() -> None:
    broad = EgressGuard(["100.64.0.0/10", "169.254.0.0/16"])
    assert broad.refusal_without_lookup("100.64.1.1") is None  # e.g. a VPN in the CGNAT range
    assert broad.refusal_without_lookup("100.100.100.200") == "cloud metadata"
    assert broad.refusal_without_lookup("169.254.169.254") == "cloud metadata"
    assert EgressGuard(["169.254.169.254"]).refusal_without_lookup("169.254.169.254") is None


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "not a host", "http://x/", "a,,b!"])
def test_a_bad_allowlist_entry_refuses_to_start(entry: str) -> None:
    with pytest.raises(ConfigError) as caught:
        EgressGuard.from_settings(Settings(egress_allow=entry))
    assert caught.value.field == "egress_allow"


def test_the_allowlist_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONTHEDOT_EGRESS_ALLOW", " hooks.internal , 10.0.0.0/8 ,")
    guard = EgressGuard.from_settings(load_settings())
    assert guard.refusal_without_lookup("hooks.internal") is None
    assert guard.refusal_without_lookup("10.20.30.40") is None
    assert guard.refusal_without_lookup("192.168.0.1") == "private"
    monkeypatch.delenv("ONTHEDOT_EGRESS_ALLOW")
    assert EgressGuard.from_settings(load_settings()).refusal_without_lookup("10.20.30.40") \
        == "private"
