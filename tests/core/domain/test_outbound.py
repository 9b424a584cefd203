"""The rules of the server's outbound requests: which URLs, hosts and addresses it may reach for
someone else, IPv6 forms that carry an IPv4 address judged by that address."""

from __future__ import annotations

import ipaddress

import pytest

from core.domain.outbound import (
    WEB_PUSH_HOSTS,
    address_allowed,
    embedded_ipv4,
    host_allowed,
    plainly_private,
    url_problem,
)

# Each hides an address no stranger may aim the server at: loopback, the cloud metadata address,
# a private network.
HIDDEN = [
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "::127.0.0.1",  # IPv4-compatible
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:0:7f00:1",  # SIIT, IPv4-translated
    "::ffff:0:a00:1",  # SIIT of 10.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:c0a8:0101::1",  # 6to4 of 192.168.1.1
    "64:ff9b:1::7f00:1",  # local-use NAT64: refused whatever it carries
    "64:ff9b:1::808:808",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo: refused
    "::1",
    "::",
    "fe80::1",
    "fd00::1",
    "ff02::1",
    "127.0.0.1",
    "10.1.2.3",
    "100.64.0.1",
    "169.254.169.254",
    "0.0.0.0",  # noqa: S104
    "224.0.0.1",
]
PUBLIC = ["8.8.8.8", "2606:4700::1111", "64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8"]


@pytest.mark.parametrize("text", HIDDEN)
def test_addresses_that_hide_a_non_public_one_are_refused(text: str) -> None:
    assert not address_allowed(ipaddress.ip_address(text), allow_private=False)


@pytest.mark.parametrize("text", PUBLIC)
def test_public_addresses_in_any_form_are_allowed(text: str) -> None:
    assert address_allowed(ipaddress.ip_address(text), allow_private=False)


@pytest.mark.parametrize(
    ("text", "inner"),
    [
        ("64:ff9b::7f00:1", "127.0.0.1"),
        ("::127.0.0.1", "127.0.0.1"),
        ("::ffff:0:7f00:1", "127.0.0.1"),
        ("::ffff:127.0.0.1", "127.0.0.1"),
        ("2002:a9fe:a9fe::1", "169.254.169.254"),
        ("2606:4700::1111", None),
        ("::1", None),
        ("::", None),
    ],
)
def test_the_ipv4_address_inside_a_transition_form_is_found(text: str, inner: str | None) -> None:
    found = embedded_ipv4(ipaddress.IPv6Address(text))
    assert (str(found) if found else None) == inner


def test_allowing_private_addresses_still_refuses_unspecified_multicast_and_the_refused_prefixes() -> None:
    for text in ("127.0.0.1", "10.1.2.3", "::1", "fd00::1", "64:ff9b::7f00:1"):
        assert address_allowed(ipaddress.ip_address(text), allow_private=True), text
    for text in ("0.0.0.0", "::", "224.0.0.1", "ff02::1", "64:ff9b:1::7f00:1", "::ffff:0.0.0.0"):  # noqa: S104
        assert not address_allowed(ipaddress.ip_address(text), allow_private=True), text


@pytest.mark.parametrize(
    "url",
    [
        "https://x.example/\x00",
        "https://x.example/a\tb",
        "https://x.example/\x7f",
        "https://x.example/\u202e",
        "https://x.example/a b",
        "http://x.example/",
        "ftp://x.example/",
        "https://user@x.example/",
        "https://x.example/#frag",
        "https:///path",
        "https://[::1/",
        "https://2130706433/",
        "https://x.example:99999/",
        "https://" + "a" * 2040 + ".example/",
        "https://under_score.example/",
    ],
)
def test_a_url_that_is_not_plain_https_to_a_host_is_refused(url: str) -> None:
    assert url_problem(url, "the URL") is not None


@pytest.mark.parametrize(
    "url",
    ["https://x.example/", "https://x.example:8443/p?q=1", "https://[2606:4700::1111]/", "https://8.8.8.8/"],
)
def test_plain_https_urls_pass(url: str) -> None:
    assert url_problem(url, "the URL") is None


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("fcm.googleapis.com", True),
        ("FCM.googleapis.com.", True),
        ("web.push.apple.com", True),
        ("api.push.apple.com", True),
        ("push.apple.com", False),  # *. is the names below it, not the domain itself
        ("evilpush.apple.com", False),
        ("push.apple.com.evil.example", False),
        ("wns2-par02p.notify.windows.com", True),
        ("updates.push.services.mozilla.com", True),
        ("push.services.mozilla.com", False),
        ("googleapis.com", False),
        ("fcm.googleapis.com.evil.example", False),
        ("127.0.0.1", False),
    ],
)
def test_web_push_keeps_to_the_push_services_hosts(host: str, allowed: bool) -> None:
    assert host_allowed(host, WEB_PUSH_HOSTS) is allowed


def test_an_added_host_may_be_a_name_a_domain_or_an_address() -> None:
    added = ("push.example.org", "*.corp.example", "[::1]", "127.0.0.1")
    assert host_allowed("push.example.org", added)
    assert host_allowed("a.b.corp.example", added)
    assert host_allowed("::1", added) and host_allowed("0:0::1", added)
    assert host_allowed("127.0.0.1", added)
    assert not host_allowed("corp.example", added)


@pytest.mark.parametrize(
    "host", ["localhost", "a.localhost", "127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::7f00:1"]
)
def test_a_host_that_is_plainly_private_is_known_without_dns(host: str) -> None:
    assert plainly_private(host)
