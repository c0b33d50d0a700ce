"""Addresses parsed, resolved and bound as Go's ``net`` package does, with its error texts.

Listen and dial addresses are written as Go writes them (``127.0.0.1:3310``, ``[::1]:3310``).
Binding is loopback only unless the server was started to allow other addresses.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import os
import socket

from zephon_chaos.faults.proxy.api_errors import ApiError, internal

LISTEN_BACKLOG = 1024


def split_host_port(address: str, op: str) -> tuple[str, str]:
    """Go's ``net.SplitHostPort``; errors start with ``op`` (``listen tcp``, ``dial tcp``)."""

    def fail(why: str) -> ApiError:
        return internal(f"{op}: address {address}: {why}")

    if address.startswith("["):
        end = address.find("]")
        if end < 0:
            raise fail("missing ']' in address")
        host, rest = address[1:end], address[end + 1 :]
        if not rest.startswith(":"):
            raise fail("missing port in address" if not rest else "too many colons in address")
        return host, rest[1:]
    if ":" not in address:
        raise fail("missing port in address")
    host, _, port = address.rpartition(":")
    if ":" in host:
        raise fail("too many colons in address")
    return host, port


def parse_port(port: str, address: str, op: str) -> int:
    if port == "":
        return 0
    if port.isdigit():
        number = int(port)
        if number > 65535:
            raise internal(f"{op}: address {address}: invalid port")
        return number
    try:
        return socket.getservbyname(port, "tcp")
    except OSError:
        raise internal(f"{op}: lookup tcp/{port}: unknown port") from None


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


async def resolve(host: str, port: int, op: str) -> list[str]:
    """The IP addresses a host name stands for, IPv4 first (Go's preference for Listen)."""
    if host == "":
        return []
    with contextlib.suppress(ValueError):
        return [str(ipaddress.ip_address(host.split("%", 1)[0]))]
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise internal(f"{op}: lookup {host}: no such host") from None
    found = [str(info[4][0]) for info in infos]
    ordered = [a for a in found if ":" not in a] + [a for a in found if ":" in a]
    return list(dict.fromkeys(ordered))


def strerror(exc: OSError) -> str:
    """Go prints errno text in lower case (``address already in use``)."""
    text = os.strerror(exc.errno) if exc.errno else str(exc)
    return text[:1].lower() + text[1:]


async def bind_listener(listen: str, *, allow_non_loopback: bool) -> socket.socket:
    """Bind and listen like Go's ``net.Listen("tcp", listen)``, loopback only unless allowed."""
    op = "listen tcp"
    host, port_text = split_host_port(listen, op)
    port = parse_port(port_text, listen, op)
    addresses = await resolve(host, port, op)
    if not addresses:
        if not allow_non_loopback:
            raise internal(
                f"{op} {listen}: refused: this embedded Toxiproxy binds loopback addresses "
                f"only; listen on 127.0.0.1:{port} (or start it with --allow-non-loopback)"
            )
        addresses = ["0.0.0.0"]
    address = addresses[0]
    if not allow_non_loopback and not is_loopback(address):
        raise internal(
            f"{op} {format_address(address, port)}: refused: this embedded Toxiproxy binds "
            f"loopback addresses only; use 127.0.0.1 (or start it with --allow-non-loopback)"
        )
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setblocking(False)
        sock.bind((address, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        step = (
            "listen"
            if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES)
            else "bind"
        )
        raise internal(f"{op} {format_address(address, port)}: {step}: {strerror(exc)}") from None
    return sock


def same_listen(a: str, b: str) -> bool:
    """Whether two listen addresses name the same socket address (``localhost`` = 127.0.0.1)."""

    def norm(address: str) -> str:
        try:
            host, port = split_host_port(address, "listen tcp")
        except ApiError:
            return address
        host = "127.0.0.1" if host == "localhost" else host
        with contextlib.suppress(ValueError):
            host = str(ipaddress.ip_address(host))
        return format_address(host, int(port) if port.isdigit() else 0)

    return a == b or norm(a) == norm(b)
