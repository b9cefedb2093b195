"""Which URLs a webhook may call, and the one address a delivery connects to.

A target's host is resolved once per check and every address it resolves to must be public
(unless STRATA_WEBHOOK_ALLOW_PRIVATE): loopback, private, link-local, multicast, reserved and
other non-global addresses are refused, and so are IPv6 forms that carry an IPv4 address
(IPv4-mapped `::ffff:a.b.c.d`, 6to4 `2002::/16`, NAT64 `64:ff9b::/96`, Teredo) whenever the
address they carry would be. A delivery then connects to the very address that passed
(`Target.address`), with the URL's host name kept for the `Host` header and TLS, so a name
that resolves differently a moment later (DNS rebinding) cannot redirect it. With
STRATA_WEBHOOK_ALLOW_PRIVATE every address is allowed, so nothing is resolved or pinned.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from app.domain.errors import InvalidInput

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class TargetRefused(InvalidInput):
    """The URL is not one Strata may call."""


@dataclass(frozen=True)
class Target:
    url: str
    host: str
    port: int
    address: IPAddress | None  # None: any address is allowed, connect by name

    @property
    def pinned_url(self) -> str:
        """The URL with its host replaced by the checked address."""
        if self.address is None:
            return self.url
        parts = urlsplit(self.url)
        literal = f"[{self.address}]" if self.address.version == 6 else str(self.address)
        return urlunsplit(parts._replace(netloc=f"{literal}:{self.port}"))

    @property
    def host_header(self) -> str:
        default = 443 if urlsplit(self.url).scheme == "https" else 80
        name = f"[{self.host}]" if ":" in self.host else self.host
        return name if self.port == default else f"{name}:{self.port}"


def embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (mapped, 6to4, NAT64, Teredo)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    carried: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        carried.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        carried.append(address.sixtofour)
    if address in NAT64:
        carried.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address.teredo is not None:
        carried.extend(address.teredo)
    return carried


def forbidden_kind(address: IPAddress) -> str | None:
    """Why Strata may not call this address, or None. An address that carries an IPv4
    address is judged by what it carries."""
    carried = embedded_ipv4(address)
    if carried:
        return next((kind for kind in map(_kind_of, carried) if kind is not None), None)
    return _kind_of(address)


def _kind_of(address: IPAddress) -> str | None:
    checks = (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("unspecified", address.is_unspecified),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
        ("non-public", not address.is_global),
    )
    return next((kind for kind, hit in checks if hit), None)


async def _addresses(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise TargetRefused(f"url: host {host!r} does not resolve ({exc})", field="url") from exc
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


async def resolve_target(
    url: str, *, allow_private: bool, setting: str = "STRATA_WEBHOOK_ALLOW_PRIVATE"
) -> Target:
    """An http(s) URL whose host resolves to allowed addresses only, and the first of them.

    Checked when a subscription is written and again before every attempt, since what a
    name resolves to may change."""
    url = url.strip()
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise TargetRefused(f"url: not a valid URL ({exc})", field="url") from exc
    if parts.scheme not in ("http", "https"):
        raise TargetRefused("url: only http and https URLs are allowed", field="url")
    host = parts.hostname
    if not host:
        raise TargetRefused("url: the URL names no host", field="url")
    if allow_private:
        return Target(url=url, host=host, port=port, address=None)
    addresses = await _addresses(host, port)
    for address in addresses:
        kind = forbidden_kind(address)
        if kind is not None:
            raise TargetRefused(
                f"url: {host} resolves to {address}, a {kind} address; "
                f"set {setting}=true to allow such targets",
                field="url",
            )
    return Target(url=url, host=host, port=port, address=addresses[0])


async def check_target(
    url: str, *, allow_private: bool, setting: str = "STRATA_WEBHOOK_ALLOW_PRIVATE"
) -> str:
    """The URL, once it passed `resolve_target` (`setting` is the one a refusal names)."""
    return (await resolve_target(url, allow_private=allow_private, setting=setting)).url


async def checked_address(
    url: str, *, allow_private: bool, setting: str = "STRATA_WEBHOOK_ALLOW_PRIVATE"
) -> str | None:
    """The address a connection to `url` must use, once the URL passed `resolve_target`
    (None: any address is allowed, connect by name)."""
    target = await resolve_target(url, allow_private=allow_private, setting=setting)
    return None if target.address is None else str(target.address)
