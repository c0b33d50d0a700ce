"""Hosts as network namespaces: one bridge, one veth per host, real partitions between them.

A :class:`HostNetwork` of N hosts is N + 1 named namespaces: one holds the bridge (``br0``)
and a port per host (``h<k>``), each host holds the other end of its veth as ``eth0`` with
one address of 198.18.0.0/15 (the benchmarking range), loopback up, and no default route.
Nothing is created in the machine's own namespace, so nothing can route out. Names carry
the creating process (``<pid>.<start ticks>``) and a random token, and each network draws its
own /24, so parallel xdist workers never collide and leftovers of a dead process are told
apart from a live one's (:func:`stale_namespaces`).

Faults between hosts (:meth:`HostNetwork.partition`): the host's bridge port down (a pulled
cable: packets vanish, no error reaches either side), or nftables rules in the host's
namespace that drop (or reset) traffic to and from chosen peers, in one direction or both;
:meth:`HostNetwork.heal` undoes them. :meth:`HostNetwork.delay` adds netem latency where the
kernel has it. Each optional tool is detected, and its absence is a reason in words.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import ipaddress
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from zephon_chaos.errors import HarnessError
from zephon_chaos.procs import ProcId, proc_id

NETNS_DIR = "/run/netns"
PREFIX = "zc-"
IFNAME = "eth0"
"""The host's end of its veth, inside the host's namespace (names are per namespace)."""
BRIDGE = "br0"
TEST_RANGE = ipaddress.ip_network("198.18.0.0/15")
FIRST_HOST = 10
"""Host k gets ``.10 + k``: c10d rendezvous ranks nodes by their address as a string, and
two-digit last octets keep that order equal to the host index (up to 89 hosts)."""
IP_TIMEOUT_S = 10.0
NFT_TABLE = "zc_cut"


class NetnsError(HarnessError, RuntimeError):
    """An ``ip``/``nft``/``tc`` command failed; the message names the command and its error."""


class CutKind(enum.Enum):
    """How a host is cut off."""

    LINK = "link"
    """Its bridge port down: every packet to and from it vanishes (a pulled cable)."""
    DROP = "drop"
    """nftables in the host drops packets to/from the peers (silence, like a firewall)."""
    REJECT = "reject"
    """nftables answers TCP with a reset and the rest with ICMP unreachable."""


class Direction(enum.Enum):
    BOTH = "both"
    INBOUND = "inbound"
    """Packets from the peers never reach the host; its own still leave."""
    OUTBOUND = "outbound"
    """The host's packets never leave for the peers; theirs still arrive."""


@dataclass(frozen=True)
class Host:
    index: int
    netns: str
    address: str
    port: str
    """Its veth's end on the bridge, in the bridge's namespace."""

    def exec_prefix(self) -> list[str]:
        """What runs a command inside this host: ``ip netns exec <name>``."""
        return ["ip", "netns", "exec", self.netns]


@dataclass(frozen=True)
class Cut:
    """One partition as applied: whom, how, against which peers, when (``CLOCK_MONOTONIC``)."""

    host: int
    kind: CutKind
    direction: Direction
    peers: tuple[int, ...]
    at: float


# ---- detection -----------------------------------------------------------------------------
@functools.cache
def netns_unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None (probed once per process)."""
    if os.geteuid() != 0:
        return "network namespaces need root (`ip netns add`); run as root"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed (Debian: apt-get install iproute2)"
    probe = f"{PREFIX}probe-{os.getpid()}-{secrets.token_hex(3)}"
    try:
        _run(["ip", "netns", "add", probe])
    except NetnsError as exc:
        return f"`ip netns add` fails here: {exc}"
    with contextlib.suppress(NetnsError):
        _run(["ip", "netns", "del", probe])
    return None


_TOOL_REASONS: dict[str, str | None] = {}


def _probe_in(netns: str, what: str, argv: list[str], undo: list[str] | None) -> str | None:
    if what in _TOOL_REASONS:
        return _TOOL_REASONS[what]
    reason: str | None = None
    if shutil.which(argv[0]) is None:
        reason = f"`{argv[0]}` is not installed"
    else:
        try:
            _run(["ip", "netns", "exec", netns, *argv])
            if undo:
                _run(["ip", "netns", "exec", netns, *undo])
        except NetnsError as exc:
            reason = f"{what} is not usable on this kernel: {exc}"
    _TOOL_REASONS[what] = reason
    return reason


# ---- commands ------------------------------------------------------------------------------
def _run(argv: list[str], stdin: str | None = None, timeout_s: float = IP_TIMEOUT_S) -> str:
    try:
        done = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise NetnsError(f"`{' '.join(argv)}` did not finish within {timeout_s} s") from None
    except OSError as exc:
        raise NetnsError(f"`{' '.join(argv)}` could not start: {exc.strerror}") from None
    if done.returncode != 0:
        raise NetnsError(f"`{' '.join(argv)}` failed: {done.stderr.strip() or done.returncode}")
    return done.stdout


def named_namespaces() -> set[str]:
    """Names under ``/run/netns`` (the named namespaces of this machine)."""
    with contextlib.suppress(OSError):
        return set(os.listdir(NETNS_DIR))
    return set()


def namespace_inode(name: str) -> int | None:
    try:
        return os.stat(os.path.join(NETNS_DIR, name)).st_ino
    except OSError:
        return None


def processes_in(inodes: set[int]) -> list[ProcId]:
    """Live processes whose network namespace is one of ``inodes`` (by ``/proc/<pid>/ns/net``)."""
    found: list[ProcId] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            link = os.readlink(f"/proc/{name}/ns/net")
        except OSError:
            continue
        if link.startswith("net:[") and int(link[5:-1]) in inodes:
            pid_id = proc_id(int(name))
            if pid_id is not None:
                found.append(pid_id)
    return sorted(found)


def delete_namespace(name: str) -> None:
    if name in named_namespaces():
        _run(["ip", "netns", "del", name])


def stale_namespaces() -> list[str]:
    """Namespaces of ours whose creating process is gone (a crashed run's leftovers)."""
    stale = []
    for name in sorted(named_namespaces()):
        if not name.startswith(PREFIX):
            continue
        owner = name[len(PREFIX) :].split("-", 1)[0]
        pid, _, ticks = owner.partition(".")
        if not (pid.isdigit() and ticks.isdigit()):
            continue
        if proc_id(int(pid)) != ProcId(int(pid), int(ticks)):
            stale.append(name)
    return stale


def _owner_tag() -> str:
    me = proc_id(os.getpid())
    return f"{os.getpid()}.{me.ticks if me else 0}"


def _subnet(token: str) -> ipaddress.IPv4Network:
    """One /24 of 198.18.0.0/15 per network, drawn from its token (512 to choose from)."""
    subnets = list(TEST_RANGE.subnets(new_prefix=24))  # type: ignore[union-attr]
    return subnets[int(token, 16) % len(subnets)]  # type: ignore[return-value]


# ---- the network ---------------------------------------------------------------------------
@dataclass
class HostNetwork:
    """N hosts on one bridge; ``create()`` builds it, ``close()`` removes every trace of it."""

    size: int
    token: str = field(default_factory=lambda: secrets.token_hex(4))
    hosts: list[Host] = field(default_factory=list)
    cuts: dict[int, Cut] = field(default_factory=dict)
    inodes: dict[str, int] = field(default_factory=dict)
    """Namespace name → inode, for each namespace this network made (and only those)."""

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"a host network needs at least one host, got {self.size}")
        if self.size > 255 - FIRST_HOST:
            raise ValueError(f"at most {255 - FIRST_HOST} hosts fit one /24, got {self.size}")
        self.subnet = _subnet(self.token)
        base = f"{PREFIX}{_owner_tag()}-{self.token}"
        self.bridge_netns = f"{base}-br"
        self.hosts = [
            Host(k, f"{base}-h{k}", str(self.subnet[FIRST_HOST + k]), f"h{k}")
            for k in range(self.size)
        ]

    @property
    def names(self) -> list[str]:
        """Every namespace of this network (for the leak check)."""
        return [self.bridge_netns, *(h.netns for h in self.hosts)]

    def host(self, index: int) -> Host:
        if not 0 <= index < self.size:
            raise IndexError(f"host {index} is not one of this network's {self.size}")
        return self.hosts[index]

    def create(self) -> HostNetwork:
        """Build it; on any failure, remove what was made and raise."""
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def _create(self) -> None:
        br = self.bridge_netns
        for name in self.names:
            _run(["ip", "netns", "add", name])
            self.inodes[name] = namespace_inode(name) or 0
        _run(["ip", "-n", br, "link", "add", BRIDGE, "type", "bridge"])
        _run(["ip", "-n", br, "link", "set", BRIDGE, "up"])
        prefix = self.subnet.prefixlen
        for h in self.hosts:
            veth = ["type", "veth", "peer", "name", IFNAME, "netns", h.netns]
            _run(["ip", "-n", br, "link", "add", h.port, *veth])
            _run(["ip", "-n", br, "link", "set", h.port, "master", BRIDGE, "up"])
            _run(["ip", "-n", h.netns, "link", "set", "lo", "up"])
            _run(["ip", "-n", h.netns, "addr", "add", f"{h.address}/{prefix}", "dev", IFNAME])
            _run(["ip", "-n", h.netns, "link", "set", IFNAME, "up"])

    def close(self) -> list[str]:
        """Remove every namespace of this network (its links and nft tables go with it).

        Returns what could not be removed, or still lives on in a process that remained in
        one of its namespaces (a namespace outlives its name while a process is inside).
        """
        problems = []
        for name in reversed(self.names):
            if name not in self.inodes:
                continue  # never made by this network: not ours to remove
            try:
                delete_namespace(name)
            except NetnsError as exc:
                problems.append(str(exc))
        for proc in processes_in(set(self.inodes.values()) - {0}):
            problems.append(f"process {proc.pid} still lives in a namespace of {self.token}")
        return problems

    def exists(self) -> list[str]:
        """The namespaces of this network that still have a name."""
        return sorted(set(self.names) & named_namespaces())

    # ---- faults ----------------------------------------------------------------------------
    def partition(
        self,
        index: int,
        kind: CutKind = CutKind.LINK,
        direction: Direction = Direction.BOTH,
        peers: Sequence[int] | None = None,
    ) -> Cut:
        """Cut host ``index`` off from ``peers`` (default: every other host).

        ``LINK`` cuts it from everyone, both ways; ``DROP``/``REJECT`` need nftables
        (:meth:`nft_unavailable`) and honour ``direction`` and ``peers``.
        """
        host = self.host(index)
        others = tuple(k for k in range(self.size) if k != index) if peers is None else tuple(peers)
        if index in self.cuts:
            raise NetnsError(f"host {index} is already cut ({self.cuts[index]}); heal it first")
        if kind is CutKind.LINK:
            if direction is not Direction.BOTH or set(others) != set(range(self.size)) - {index}:
                raise ValueError(
                    "a link cut takes the host off the bridge: both directions, every peer; "
                    "use CutKind.DROP for one direction or some peers"
                )
            _run(["ip", "-n", self.bridge_netns, "link", "set", host.port, "down"])
        else:
            reason = self.nft_unavailable()
            if reason is not None:
                raise NetnsError(f"cannot cut with nftables: {reason}")
            addrs = ", ".join(self.host(k).address for k in others)
            rules = _nft_rules(kind, direction, addrs)
            _run([*host.exec_prefix(), "nft", "-f", "-"], stdin=rules)
        cut = Cut(index, kind, direction, others, time.monotonic())
        self.cuts[index] = cut
        return cut

    def heal(self, index: int) -> float:
        """Undo host ``index``'s cut; return when (``CLOCK_MONOTONIC``)."""
        cut = self.cuts.pop(index, None)
        if cut is None:
            raise NetnsError(f"host {index} is not cut")
        host = self.host(index)
        if cut.kind is CutKind.LINK:
            _run(["ip", "-n", self.bridge_netns, "link", "set", host.port, "up"])
        else:
            _run([*host.exec_prefix(), "nft", "delete", "table", "inet", NFT_TABLE])
        return time.monotonic()

    def delay(self, index: int, ms: int) -> None:
        """Add ``ms`` of latency to every packet host ``index`` sends (netem; detected)."""
        reason = self.netem_unavailable()
        if reason is not None:
            raise NetnsError(f"cannot delay: {reason}")
        host = self.host(index)
        netem = ["netem", "delay", f"{ms}ms"]
        _run(["tc", "-n", host.netns, "qdisc", "replace", "dev", IFNAME, "root", *netem])

    def nft_unavailable(self) -> str | None:
        """Why nftables rules cannot be used here, or None (probed once per process)."""
        return _probe_in(self.bridge_netns, "nftables", ["nft", "list", "tables"], None)

    def netem_unavailable(self) -> str | None:
        """Why netem cannot be used here, or None (probed once per process)."""
        return _probe_in(
            self.bridge_netns,
            "netem (sch_netem)",
            ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
            ["tc", "qdisc", "del", "dev", "lo", "root"],
        )

    def __enter__(self) -> HostNetwork:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _nft_rules(kind: CutKind, direction: Direction, addrs: str) -> str:
    """One ``inet`` table whose input/output chains drop (or reset) the peers' traffic on
    ``eth0``; the resets the kernel loops back to the host's own sockets pass (on ``lo``)."""
    chains = []
    if direction in (Direction.BOTH, Direction.INBOUND):
        chains.append(("input", f'iifname "{IFNAME}" ip saddr {{ {addrs} }}'))
    if direction in (Direction.BOTH, Direction.OUTBOUND):
        chains.append(("output", f'oifname "{IFNAME}" ip daddr {{ {addrs} }}'))
    body = []
    for hook, match in chains:
        if kind is CutKind.REJECT:
            rules = [f"{match} meta l4proto tcp reject with tcp reset", f"{match} reject"]
        else:
            rules = [f"{match} drop"]
        body.append(
            f"  chain {hook} {{\n    type filter hook {hook} priority 0; policy accept;\n"
            + "".join(f"    {r}\n" for r in rules)
            + "  }"
        )
    return f"table inet {NFT_TABLE} {{\n" + "\n".join(body) + "\n}\n"
