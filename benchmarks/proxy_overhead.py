"""What the embedded proxy (no toxic) adds to c10d TCPStore traffic, measured side by side.

Round trips (get, check, add, wait on an existing key) run direct and through the proxy in
alternating blocks of one run, so that machine drift hits both alike; the result is the median,
over blocks, of the added microseconds per round trip. Then 4 MiB set+get throughput, direct
and proxied, and their ratio. Targets: added ≤ ~60-140 µs per round trip (what the Go
Toxiproxy adds on loopback) and a throughput ratio ≥ 0.7. Bounded: about 30 s at most.

    PYTHONPATH=src python benchmarks/proxy_overhead.py [--rounds N] [--ops-per-block N]
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable

import torch.distributed as dist

from zephon_chaos.faults.proxy import EmbeddedToxiproxy, ToxiproxyClient

Store = dist.TCPStore
OPS: dict[str, Callable[[Store], object]] = {
    "get": lambda store: store.get("key"),
    "check": lambda store: store.check(["key"]),
    "add": lambda store: store.add("counter", 1),
    "wait": lambda store: store.wait(["key"]),
}
BULK_BYTES = 4 << 20
TARGET_ADDED_US = 140.0
TARGET_RATIO = 0.7
BUDGET_S = 45.0


def per_op_us(store: Store, op: Callable[[Store], object], count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        op(store)
    return (time.perf_counter() - started) / count * 1e6


def bulk_seconds(store: Store, value: bytes, key: str) -> float:
    started = time.perf_counter()
    store.set(key, value)
    got = store.get(key)
    elapsed = time.perf_counter() - started
    assert len(got) == len(value)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="blocks per op and mode")
    parser.add_argument("--ops-per-block", type=int, default=300)
    parser.add_argument("--bulk-rounds", type=int, default=6)
    args = parser.parse_args(argv)
    deadline = time.monotonic() + BUDGET_S
    load_at_start = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    timeout = datetime.timedelta(seconds=30)

    listener = socket.create_server(("127.0.0.1", 0))
    port = int(listener.getsockname()[1])
    server = Store(
        "127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timeout,
        master_listen_fd=listener.detach(),
    )  # fmt: skip
    with EmbeddedToxiproxy() as embedded, ToxiproxyClient(embedded.url) as client:
        proxy = client.create_proxy("tcpstore", f"127.0.0.1:{port}")
        stores = {
            "direct": Store("127.0.0.1", port, is_master=False, timeout=timeout),
            "proxied": Store("127.0.0.1", proxy.port, is_master=False, timeout=timeout),
        }
        stores["direct"].set("key", b"value")
        for store in stores.values():  # warm both paths
            for op in OPS.values():
                per_op_us(store, op, 50)

        added: dict[str, list[float]] = {name: [] for name in OPS}
        base: dict[str, list[float]] = {name: [] for name in OPS}
        for block in range(args.rounds):
            if time.monotonic() > deadline - 10:
                print(f"(round trips: stopped after {block} blocks to stay within budget)")
                break
            order = ("direct", "proxied") if block % 2 == 0 else ("proxied", "direct")
            for name, op in OPS.items():
                timing = {mode: per_op_us(stores[mode], op, args.ops_per_block) for mode in order}
                added[name].append(timing["proxied"] - timing["direct"])
                base[name].append(timing["direct"])

        value = os.urandom(BULK_BYTES)
        bulk: dict[str, list[float]] = {"direct": [], "proxied": []}
        for block in range(args.bulk_rounds):
            if time.monotonic() > deadline:
                print(f"(bulk: stopped after {block} rounds to stay within budget)")
                break
            order = ("direct", "proxied") if block % 2 == 0 else ("proxied", "direct")
            for mode in order:
                bulk[mode].append(bulk_seconds(stores[mode], value, f"bulk-{mode}"))
        stats = client.proxy_stats(proxy.name)
        for store in stores.values():
            del store
        stores.clear()
    del server

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"TCPStore through the embedded proxy (no toxic); python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {load} (start: {load_at_start})")  # fmt: skip
    print(f"{'op':<8}{'direct µs':>12}{'added µs (median)':>20}{'added µs (p10-p90)':>22}")
    worst = 0.0
    for name in OPS:
        median = statistics.median(added[name])
        deciles = statistics.quantiles(added[name], n=10) if len(added[name]) > 1 else [median] * 9
        worst = max(worst, median)
        print(
            f"{name:<8}{statistics.median(base[name]):>12.1f}{median:>20.1f}"
            f"{deciles[0]:>10.1f} - {deciles[-1]:<9.1f}"
        )
    mib = BULK_BYTES / (1 << 20)
    rates = {mode: 2 * mib / statistics.median(times) for mode, times in bulk.items() if times}
    ratio = rates["proxied"] / rates["direct"]
    print(
        f"4 MiB set+get: direct {rates['direct']:.0f} MiB/s, proxied {rates['proxied']:.0f} "
        f"MiB/s, ratio {ratio:.2f}"
    )
    print(
        f"proxy counters: {stats.connections_accepted} connections, "
        f"{stats.upstream.bytes_sent} B up, {stats.downstream.bytes_sent} B down"
    )
    verdicts = [
        f"round trip overhead: worst median {worst:.0f} µs vs target ≤ {TARGET_ADDED_US:.0f} µs "
        f"-> {'met' if worst <= TARGET_ADDED_US else 'MISSED'}",
        f"throughput ratio: {ratio:.2f} vs target ≥ {TARGET_RATIO} "
        f"-> {'met' if ratio >= TARGET_RATIO else 'MISSED'}",
    ]
    for line in verdicts:
        print(line)
    if worst > TARGET_ADDED_US or ratio < TARGET_RATIO:
        print(
            "note: the embedded proxy is pure-Python asyncio sharing this process (and its GIL) "
            "with the client under test; each round trip costs two loop wake-ups and four "
            "socket calls in Python. A busy or small machine widens the gap; a real "
            "toxiproxy-server (TOXIPROXY_URL or on PATH) avoids it."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
