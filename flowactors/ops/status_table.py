"""Plain-text tables of a running flow's processors and queues (the CLI's live view)."""

from __future__ import annotations


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def render(status: dict, elapsed: float | None = None) -> str:
    head = f"flow {status['flow']}" + (f"  ({elapsed:.1f} s)" if elapsed is not None else "")
    processors = _table(
        ["processor", "type", "in", "out", "read", "written", "tasks", "errors", "state"],
        [[p["name"], p["type"], str(p["flowfiles_in"]), str(p["flowfiles_out"]), _size(p["bytes_read"]),
          _size(p["bytes_written"]), str(p["tasks"]), str(p["errors"]),
          "back pressure" if p["back_pressure"] else ("idle" if p["idle"] else "running")]
         for p in status["processors"]])
    queues = _table(
        ["queue", "queued", "in flight", "swapped", "bytes", "back pressure"],
        [[q["id"], str(q["queued"]), str(q["in_flight"]), str(q.get("swapped", 0)), _size(q["bytes"]),
          "YES" if q["back_pressure"] else "no"]
         for q in status["queues"]])
    errors = [f"  {p['name']}: {e['where']}: {e['error']}" for p in status["processors"] for e in p["recent_errors"]]
    parts = [head, processors, "", queues]
    if status.get("nodes"):  # a flow on several nodes (docs/cluster.md)
        waiting = status.get("waiting_for_node", {})
        parts += ["", _table(
            ["node", "state", "primary", "taken in", "queued here", "waiting for it"],
            [[name, "connected" if n.get("connected") else "AWAY", "yes" if n.get("primary") else "",
              str(sum(p["flowfiles_in"] for p in n.get("processors", {}).values())), str(n.get("queued", 0)),
              str(waiting.get(name, 0))] for name, n in status["nodes"].items()])]
    if status.get("repairing"):
        parts += ["", f"repairing from the write-ahead log: {status['repairing']}"]
    if status.get("restarts"):
        parts += ["", "restarts: " + ", ".join(f"{kind} {n}" for kind, n in sorted(status["restarts"].items()))]
    if errors:
        parts += ["", "recent errors:", *errors[-8:]]
    return "\n".join(parts)
