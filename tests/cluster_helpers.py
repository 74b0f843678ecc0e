"""Helpers of the tests that start Rays of their own (tests/test_cluster.py, tests/test_ray_dashboard.py):
free loopback ports, stopping exactly one head's processes, and reading flowactors' series off a
metrics agent's Prometheus text."""

from __future__ import annotations

import re
import socket
import urllib.request

import psutil


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def kill_head(temp_dir: str) -> None:
    """Stop exactly this head: the processes naming its temp dir, and everything they started."""
    marker = temp_dir.rstrip("/") + "/"
    me = psutil.Process()
    mine = {me.pid, *(p.pid for p in me.parents())}
    roots = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.pid not in mine and any(marker in arg for arg in proc.info["cmdline"] or ()):
                roots.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    procs = {}
    for root in roots:
        procs[root.pid] = root
        try:
            procs.update((c.pid, c) for c in root.children(recursive=True))
        except psutil.NoSuchProcess:
            pass
    for proc in procs.values():
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(list(procs.values()), timeout=15)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass


def scrape(url: str) -> dict[tuple[str, str, str], float]:
    """flowactors series of the Prometheus text, summed over Ray's per-worker labels."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    values: dict[tuple[str, str, str], float] = {}
    for line in text.splitlines():
        if not line.startswith("ray_flowactors_"):
            continue
        name, labels, value = re.match(r"^(\w+)\{(.*)\} (\S+)$", line).groups()
        tags = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels))
        if "le" in tags:
            continue
        key = (name, tags.get("flow", ""), tags.get("component", ""))
        values[key] = values.get(key, 0.0) + float(value)
    return values
