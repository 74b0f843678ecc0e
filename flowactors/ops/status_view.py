"""A running flow's status as a person reads it: Rich tables of its processors, queues and nodes,
with rates between two looks, back pressure, and each recent error as one line.

``StatusView`` is the live view of ``flowactors run``: on a terminal a Rich ``Live`` view redrawn
in place, with whatever the run prints or logs meanwhile (a processor's log line, Ray's lines from
the actors) shown above it rather than wiped; anywhere else no control codes at all, only the
final table. An error's full text is not shown here: the run keeps it in its error log
(``flowactors.ops.error_log``), which ``flowactors errors`` prints.
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
import time
from typing import Callable

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.logging import RichHandler
from rich.table import Table
from rich.text import Text

#: what an error line is cut to (its first line; the error log has the rest)
ERROR_WIDTH = 160
#: the tables' width where they are not drawn on a terminal (a file, a pipe, a job's log)
PLAIN_WIDTH = 200
#: the environment variable that gives a run's log level to its Ray workers (``log_in_worker``)
LOG_LEVEL_ENV = "FLOWACTORS_LOG_LEVEL"
#: recent errors shown under the tables
ERRORS_SHOWN = 8
CONTROL_CODES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]")


def one_line(error: str) -> str:
    """The first non-blank line of an error's text, without terminal control codes (Ray colours
    its tracebacks), cut to ``ERROR_WIDTH`` characters."""
    lines = [line.strip() for line in CONTROL_CODES.sub("", error).splitlines() if line.strip()]
    first = lines[0] if lines else ""
    return first if len(first) <= ERROR_WIDTH else first[:ERROR_WIDTH - 3] + "..."


def size(n: float) -> str:
    """A byte count the way people read it: 512 B, 1.5 KB, 3.2 MB."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def rates(before: dict | None, after: dict, seconds: float) -> dict[tuple[str, str], dict[str, float]]:
    """FlowFiles/s and bytes/s between two statuses ``seconds`` apart (``before=None``: since the
    start), by ``("processor", name)`` and ``("queue", id)``: ``in``, ``out`` (FlowFiles/s) and
    ``bytes`` (bytes/s; a processor's read plus written, a queue's taken in). The statuses'
    counters are cumulative; one that went down (a restarted component) counts from zero."""
    if seconds <= 0:
        return {}
    old = {("processor", p["name"]): p for p in (before or {}).get("processors", [])}
    old.update({("queue", q["id"]): q for q in (before or {}).get("queues", [])})

    def per_second(key: tuple[str, str], new: dict, *fields: str) -> float:
        now, then = sum(new.get(f, 0) for f in fields), sum(old.get(key, {}).get(f, 0) for f in fields)
        return (now - then if now >= then else now) / seconds

    out: dict[tuple[str, str], dict[str, float]] = {}
    for p in after.get("processors", []):
        key = ("processor", p["name"])
        out[key] = {"in": per_second(key, p, "flowfiles_in"), "out": per_second(key, p, "flowfiles_out"),
                    "bytes": per_second(key, p, "bytes_read", "bytes_written")}
    for q in after.get("queues", []):
        key = ("queue", q["id"])
        out[key] = {"in": per_second(key, q, "total_in"), "out": per_second(key, q, "total_out"),
                    "bytes": per_second(key, q, "bytes_in")}
    return out


def _rate(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{size(value)}/s" if unit == "bytes" else f"{value:,.1f}/s"


def status_tables(status: dict, elapsed: float | None = None,
                  speeds: dict[tuple[str, str], dict[str, float]] | None = None,
                  errors_command: str = "flowactors errors") -> RenderableType:
    """The status as Rich renderables: processors, queues (and nodes), restarts, recent errors one
    line each with ``errors_command`` (what prints them in full). ``speeds`` (``rates``) fills the
    rate columns; without it they show ``-``."""
    speeds = speeds or {}
    title = f"flow {status['flow']}" + (f" ({elapsed:.1f} s)" if elapsed is not None else "")
    processors = Table(title=title, title_justify="left", expand=False)
    for header in ("processor", "type"):
        processors.add_column(header, no_wrap=True)
    for header in ("in", "out", "in/s", "out/s", "read", "written", "bytes/s", "tasks", "errors", "state"):
        processors.add_column(header, justify="right", no_wrap=True)
    for p in status["processors"]:
        speed = speeds.get(("processor", p["name"]), {})
        state = ("[dim]disabled[/]" if p.get("disabled")
                 else f"[red]in on_trigger {p['stuck_seconds']:.0f} s[/]" if p.get("stuck_seconds")
                 else "[red]back pressure[/]" if p["back_pressure"] else "idle" if p["idle"] else "[green]running[/]")
        processors.add_row(Text(p["name"]), Text(p["type"]), f"{p['flowfiles_in']:,}", f"{p['flowfiles_out']:,}",
                           _rate(speed.get("in")), _rate(speed.get("out")), size(p["bytes_read"]),
                           size(p["bytes_written"]), _rate(speed.get("bytes"), "bytes"), f"{p['tasks']:,}",
                           f"[red]{p['errors']:,}[/]" if p["errors"] else "0", state)
    queues = Table(expand=False)
    queues.add_column("queue", no_wrap=True)
    for header in ("queued", "in flight", "swapped", "bytes", "in/s", "out/s", "bytes/s", "back pressure"):
        queues.add_column(header, justify="right", no_wrap=True)
    for q in status["queues"]:
        speed = speeds.get(("queue", q["id"]), {})
        queues.add_row(Text(q["id"]), f"{q['queued']:,}", f"{q['in_flight']:,}", f"{q.get('swapped', 0):,}",
                       size(q["bytes"]), _rate(speed.get("in")), _rate(speed.get("out")),
                       _rate(speed.get("bytes"), "bytes"), "[red]YES[/]" if q["back_pressure"] else "no")
    parts: list[RenderableType] = [processors, queues]
    if status.get("services"):   # controller services (docs/services.md): where they are enabled
        parts.append(Text("services: " + ", ".join(
            f"{s['name']} ({s['type']}, " + (f"enabled in {s['enabled']} executor{'s' if s['enabled'] != 1 else ''})"
                                            if s["enabled"] else "not enabled)")
            for s in status["services"])))
    if status.get("nodes"):  # a flow on several nodes (docs/cluster.md)
        waiting = status.get("waiting_for_node", {})
        nodes = Table(expand=False)
        for header in ("node", "state", "primary", "taken in", "queued here", "waiting for it"):
            nodes.add_column(header, no_wrap=True)
        for name, n in status["nodes"].items():
            nodes.add_row(Text(name), "connected" if n.get("connected") else "[red]AWAY[/]", "yes" if n.get("primary") else "",
                          str(sum(p["flowfiles_in"] for p in n.get("processors", {}).values())),
                          str(n.get("queued", 0)), str(waiting.get(name, 0)))
        parts.append(nodes)
    if status.get("repairing"):
        parts.append(Text(f"repairing from the write-ahead log: {status['repairing']}"))
    if status.get("restarts"):
        parts.append(Text("restarts: " + ", ".join(f"{kind} {n}" for kind, n in sorted(status["restarts"].items()))))
    errors = sorted((e for p in status["processors"] for e in p["recent_errors"]), key=lambda e: e.get("at", 0))
    if errors:
        names = {id(e): p["name"] for p in status["processors"] for e in p["recent_errors"]}
        parts.append(Text(f"recent errors (in full: {errors_command}):", style="bold"))
        parts += [Text(f"  {names[id(e)]}: {e['where']}: {one_line(e['error'])}", no_wrap=True, overflow="ellipsis")
                  for e in errors[-ERRORS_SHOWN:]]
    return Group(*parts)


def status_text(status: dict, elapsed: float | None = None, width: int = PLAIN_WIDTH,
                errors_command: str = "flowactors errors") -> str:
    """The status tables as plain text (no colour, no control codes), e.g. for a job's log;
    ``errors_command`` as ``status_tables``'."""
    console = Console(file=io.StringIO(), width=width, no_color=True, color_system=None, force_terminal=False)
    console.print(status_tables(status, elapsed, errors_command=errors_command))
    return console.file.getvalue().rstrip("\n")


class StatusView:
    """The live view of a run: ``start``, ``show`` each look's status, ``close`` with the final one.

    On a terminal (and ``live``), a Rich ``Live`` view refreshed in place; while it is up,
    standard output and error go through it, so what is printed or logged during the run stays
    above the table. Otherwise nothing is drawn until ``close`` prints the final table (with the
    run's average rates), without control codes. ``errors_command`` is named beside the errors
    (what prints them in full). ``log_level`` routes Python logging (the root
    and ``ray`` loggers) through Rich at that level, above the view, until ``release_logging``.
    """

    def __init__(self, live: bool = True, log_level: str | None = None, errors_command: str = "flowactors errors",
                 console: Console | None = None) -> None:
        self.console = console or Console()
        if not self.console.is_terminal and console is None:
            self.console = Console(width=PLAIN_WIDTH)  # a file or a pipe: room for every column
        self._errors_command = errors_command
        self._live = Live(console=self.console, auto_refresh=False, transient=True) \
            if live and self.console.is_terminal else None
        self._last: tuple[float, dict] | None = None
        self.release_logging: Callable[[], None] = lambda: None  # gives logging back as it was
        if log_level is not None:
            self.release_logging = route_logging(log_level, self.console if self._live else None)

    def start(self) -> None:
        """Put the live view up (on a terminal); from now on output goes above it."""
        if self._live is not None:
            self._live.start()

    def stop(self) -> None:
        """Take the live view down (again: nothing happens)."""
        if self._live is not None:
            self._live.stop()

    @property
    def live(self) -> bool:
        """Whether this view draws in place (a terminal, and asked to)."""
        return self._live is not None

    def note(self, line: str) -> None:
        """Show one line in place of the tables (what the run is doing before it has a status)."""
        if self._live is not None:
            self._live.update(Text(line), refresh=True)

    def show(self, status: dict, elapsed: float) -> None:
        """Redraw the live view with ``status``, rates since the previous ``show``."""
        if self._live is None:
            return
        now = time.monotonic()
        speeds = rates(self._last[1], status, now - self._last[0]) if self._last else None
        self._last = (now, status)
        self._live.update(status_tables(status, elapsed, speeds, self._errors_command), refresh=True)

    def close(self, final: dict, seconds: float) -> None:
        """Take the live view down and print the final table once, with the run's average rates."""
        self.stop()
        self.console.print(status_tables(final, seconds, rates(None, final, seconds), self._errors_command))


def log_in_worker() -> None:
    """A Ray worker's setup hook in a run with a log level (``run_flow(log_level=...)``): Python
    logging at ``FLOWACTORS_LOG_LEVEL`` as plain lines on standard error, which Ray forwards to
    the run's terminal, where the live view keeps them above itself."""
    logging.basicConfig(level=os.environ.get(LOG_LEVEL_ENV, "INFO"), stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")


def route_logging(level: str, console: Console | None) -> Callable[[], None]:
    """Python logging at ``level`` (a name: DEBUG, INFO, ...): through one Rich handler on
    ``console`` (a ``Live`` view on it keeps the log lines above itself), or as plain lines on
    standard error without one. Replaces the root and ``ray`` loggers' handlers (Ray gives its
    own one writing to the terminal directly, which would tear the live view). Returns what puts
    them back as they were."""
    if console is not None:
        handler: logging.Handler = RichHandler(console=console, show_path=False, markup=False, rich_tracebacks=False)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root, ray_logger = logging.getLogger(), logging.getLogger("ray")
    saved = [(logger, logger.handlers[:], logger.level, logger.propagate) for logger in (root, ray_logger)]
    root.handlers[:] = [handler]
    root.setLevel(level)
    ray_logger.handlers[:] = [handler]
    ray_logger.propagate = False

    def restore() -> None:
        for logger, handlers, was, propagate in saved:
            logger.handlers[:] = handlers
            logger.setLevel(was)
            logger.propagate = propagate
    return restore
