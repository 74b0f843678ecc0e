"""The flow page: a small aiohttp server in the flow's driver, fed by ``run_flow``'s callbacks.

``run_flow(on_started=page.on_started, on_status=page.on_status)`` hands the page the controller's
link and every status the driver looks at (ten a second); the page keeps the last few seconds of
them for rates and answers the browser from there, so a hundred open tabs cost the flow nothing.
Provenance search and lineage go through the controller's link to the provenance repository the
flow's own actor owns (``FlowController.repositories``): the sanctioned way to read a running
flow's provenance, never the files behind its back.

The server runs on an event loop of its own, in a thread; a call that waits on the flow (a
search) runs on a worker thread so the loop keeps serving. Bound to 127.0.0.1 unless told
otherwise; bound to any other address it requires a token (generated unless given, printed in
the page's address) on every request: ``?token=``, the ``X-Flowactors-Token`` header, or the
cookie the first request with ``?token=`` sets. docs/ui.md has the endpoints.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import os
import secrets
import socket
import threading
import time
from collections import deque
from importlib import resources
from pathlib import Path
from typing import Any

from aiohttp import web

from flowactors.engine.controller import FlowController
from flowactors.engine.repository_services import ProvenanceRepositoryService
from flowactors.engine.transport import Link, call_now
from flowactors.ops.flow_graph import to_svg as flow_svg
from flowactors.ops.web.address import PageAddress, remove_address, write_address
from flowactors.ops.web.services_view import processors_view, services_view
from flowactors.ops.lineage_render import to_svg
from flowactors.ops.lineage_view import condense
from flowactors.ops.status_view import CONTROL_CODES, one_line, rates
from flowactors.sdk.flow import Flow
from repositories.provenance import ProvenanceEventType
from repositories.provenance.event import ProvenanceEvent

TOKEN_HEADER = "X-Flowactors-Token"
TOKEN_COOKIE = "flowactors_token"
#: seconds of statuses kept: rates are the change over this window
RATE_WINDOW = 5.0
#: bulletins kept, newest last (NiFi's bulletin board keeps a few per component)
BULLETINS = 50
SEARCH_LIMIT = 1000
#: the names a page without a token answers to, besides the loopback address it is bound to
#: (127.0.1.1 names the machine on Debian); a DNS rebinding attack names another
LOOPBACK_NAMES = {"127.0.0.1", "localhost", "::1", "[::1]"}
STATIC = ("index.html", "page.js", "page.css")
_CONTENT_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}


class PageError(RuntimeError):
    """The page cannot start (the address is taken, the host unknown): one line to show."""


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is this machine's loopback."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror as err:
        raise PageError(f"cannot bind the flow page to {host!r}: {err.strerror}") from None
    return all(ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback for info in infos)


class StatusHistory:
    """The statuses of the last ``RATE_WINDOW`` seconds, and the rates they give."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._looks: deque[tuple[float, dict]] = deque()
        self._bulletins: dict[tuple, dict] = {}

    def add(self, status: dict, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            self._looks.append((now, status))
            while len(self._looks) > 2 and now - self._looks[1][0] >= RATE_WINDOW:
                self._looks.popleft()
            for p in status.get("processors", []):   # ten a second: a bulletin is built once
                for e in p.get("recent_errors", []):
                    key = (p["name"], e["at"], e["error"])
                    if key in self._bulletins:
                        continue
                    self._bulletins[key] = {
                        "processor": p["name"], "at": e["at"], "where": e["where"],
                        "line": one_line(e["error"]),
                        "text": CONTROL_CODES.sub("", e["error"] + "\n\n" + e.get("traceback", "")).strip()}
            if len(self._bulletins) > BULLETINS:
                for key in sorted(self._bulletins, key=lambda k: k[1])[:len(self._bulletins) - BULLETINS]:
                    del self._bulletins[key]

    def view(self) -> dict | None:
        """The latest status with rates (per second, over the window, as ``status_view.rates``
        gives them) on every processor and queue, its controller services (``services``: name,
        type, in how many executors enabled), and the bulletins; None before the first status."""
        with self._lock:
            if not self._looks:
                return None
            (then, first), (now, last) = self._looks[0], self._looks[-1]
            bulletins = sorted(self._bulletins.values(), key=lambda b: b["at"])
        seconds = now - then
        per_second = rates(first, last, seconds)   # the terminal's rates: a restarted counter counts from zero
        none = {"in": 0.0, "out": 0.0, "bytes": 0.0}

        def with_rates(item: dict, key: tuple[str, str]) -> dict:
            r = per_second.get(key, none)
            return item | {"in_per_second": round(r["in"], 2), "out_per_second": round(r["out"], 2),
                           "bytes_per_second": round(r["bytes"], 2)}

        processors = [with_rates({k: v for k, v in p.items() if k != "recent_errors"}, ("processor", p["name"]))
                      for p in last.get("processors", [])]
        queues = [with_rates(q, ("queue", q["id"])) for q in last.get("queues", [])]
        return {"flow": last.get("flow"), "started": last.get("started", False), "repairing": last.get("repairing"),
                "window_seconds": round(seconds, 2), "processors": processors, "queues": queues,
                "services": last.get("services", []), "bulletins": bulletins}


class FlowPage:
    """A running flow's page (see the module docstring). ``start`` it before ``run_flow``, give
    ``run_flow`` its ``on_started`` and ``on_status``, ``stop`` it after (or use ``with``)."""

    def __init__(self, flow: Flow, repository: str | os.PathLike, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None) -> None:
        self.flow = flow
        self.repository = Path(repository)
        self.host = host
        self.port = port
        self.token = token if token is not None else (None if is_loopback(host) else secrets.token_urlsafe(24))
        self.history = StatusHistory()
        self.controller: Link | None = None
        self.url: str | None = None
        self._graph = flow_svg(flow, live=True)
        self._services = services_view(flow)
        self._processors = processors_view(flow)
        self._address: PageAddress | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._started = time.monotonic()

    # ------------------------------------------------------------------ run_flow's callbacks
    def on_started(self, controller: Link) -> None:
        self.controller = controller

    def on_status(self, status: dict) -> None:
        self.history.add(status)

    # ------------------------------------------------------------------ serving
    def start(self) -> "FlowPage":
        """Bind and serve; write the address file. ``PageError`` if the address cannot be bound."""
        try:
            family = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)[0][0]
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
        except OSError as err:
            raise PageError(f"cannot serve the flow page on {self.host}:{self.port}: {err.strerror or err}") from None
        port = sock.getsockname()[1]
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{shown}:{port}/" + (f"?token={self.token}" if self.token else "")
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        failed: list[BaseException] = []

        def serve() -> None:
            asyncio.set_event_loop(self._loop)
            try:
                self._runner = web.AppRunner(self._app(), access_log=None)
                self._loop.run_until_complete(self._runner.setup())
                self._loop.run_until_complete(web.SockSite(self._runner, sock).start())
            except BaseException as err:   # said by start, in the caller's thread
                failed.append(err)
                sock.close()
                return
            finally:
                ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name="flowactors-page", daemon=True)
        self._thread.start()
        ready.wait()
        if failed:
            self._thread.join()
            self._loop.close()
            self._loop = self._thread = None
            raise PageError(f"cannot serve the flow page on {self.host}:{port}: {failed[0]}")
        address = PageAddress(url=self.url, flow=self.flow.name, pid=os.getpid(),
                              hostname=socket.gethostname(), started=time.time())
        try:
            write_address(self.repository, address)
        except BaseException:
            self.stop()   # nobody could find the page: its server, thread and port go with it
            raise
        self._address = address
        return self

    def stop(self) -> None:
        """Remove the address file, stop serving."""
        if self._address is not None:
            remove_address(self.repository, self._address)
            self._address = None
        if self._loop is not None and self._thread is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()
            self._loop = self._thread = None

    def __enter__(self) -> "FlowPage":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ the application
    def _app(self) -> web.Application:
        app = web.Application(middlewares=[self._check_token])
        app.router.add_get("/", self._static)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_get("/api/meta", self._meta)
        app.router.add_get("/api/status", self._status)
        app.router.add_get("/api/graph.svg", self._graph_svg)
        app.router.add_get("/api/provenance", self._provenance)
        app.router.add_get("/api/lineage", self._lineage)
        return app

    @web.middleware
    async def _check_token(self, request: web.Request, handler):
        if self.token is None:
            if request.url.host not in LOOPBACK_NAMES | {self.host}:   # another site's name, rebound here
                return web.json_response({"error": f"this flow page answers to {self._answers_to()} only, "
                                                   f"not {request.host}"}, status=403)
            return await handler(request)
        given = (request.query.get("token") or request.headers.get(TOKEN_HEADER)
                 or request.cookies.get(TOKEN_COOKIE) or "")
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return web.json_response({"error": "this flow page needs its token: open the address "
                                               "'flowactors run --ui' or 'flowactors ui' printed"}, status=401)
        response = await handler(request)
        if request.query.get("token"):
            response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="Strict")
        return response

    def _answers_to(self) -> str:
        """The names a page without a token answers to, for its refusal."""
        return "127.0.0.1 and localhost" if self.host in LOOPBACK_NAMES else f"{self.host}, 127.0.0.1 and localhost"

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info.get("name", "index.html")
        if name not in STATIC:
            raise web.HTTPNotFound()
        body = resources.files("flowactors.ops.web").joinpath("static", name).read_bytes()
        return web.Response(body=body, content_type=_CONTENT_TYPES[Path(name).suffix], charset="utf-8",
                            headers={"Cache-Control": "no-store"})

    async def _meta(self, request: web.Request) -> web.Response:
        return web.json_response({
            "flow": self.flow.name, "processors": list(self.flow.processors),
            "processor_details": self._processors, "services": self._services,
            "connections": [{"id": c.id, "source": c.source, "destination": c.destination,
                             "relationships": list(c.relationships)} for c in self.flow.connections],
            "event_types": [t.value for t in ProvenanceEventType]})

    async def _status(self, request: web.Request) -> web.Response:
        view = self.history.view()
        if view is None:
            view = {"flow": self.flow.name, "started": False, "processors": [], "queues": [], "services": [],
                    "bulletins": []}
        view["elapsed"] = round(time.monotonic() - self._started, 1)
        return web.json_response(view)

    async def _graph_svg(self, request: web.Request) -> web.Response:
        return web.Response(text=self._graph, content_type="image/svg+xml")

    async def _provenance(self, request: web.Request) -> web.Response:
        q = request.query
        filters: dict[str, Any] = {}
        if q.get("uuid", "").strip():
            filters["flowfile_uuid"] = q["uuid"].strip()
        if q.get("component", "").strip():
            filters["component_name"] = q["component"].strip()
        if q.get("type", "").strip():
            kind = q["type"].strip().upper()
            if kind not in ProvenanceEventType.__members__:
                return _refusal(f"no event type {kind!r}; the types: {', '.join(ProvenanceEventType.__members__)}")
            filters["event_type"] = kind
        try:
            limit = int(q.get("limit", "100"))
        except ValueError:
            return _refusal(f"limit must be a whole number, not {q['limit']!r}")
        if not 1 <= limit <= SEARCH_LIMIT:
            return _refusal(f"limit must be between 1 and {SEARCH_LIMIT}, not {limit}")
        provenance = await self._provenance_link()
        if isinstance(provenance, web.Response):
            return provenance
        try:
            events = await asyncio.get_running_loop().run_in_executor(
                None, call_now, provenance, ProvenanceRepositoryService.search_with, filters, limit + 1)
        except ValueError as err:   # a filter the index cannot answer
            return _refusal(str(err))
        return web.json_response({"events": [_event_json(e) for e in events[:limit]], "more": len(events) > limit})

    async def _lineage(self, request: web.Request) -> web.Response:
        uuid = request.query.get("uuid", "").strip()
        if not uuid:
            return _refusal("give the uuid of a FlowFile (find one with the provenance search)")
        expanded = frozenset(g for g in request.query.get("expand", "").split(",") if g)
        provenance = await self._provenance_link()
        if isinstance(provenance, web.Response):
            return provenance
        lineage = await asyncio.get_running_loop().run_in_executor(None, call_now, provenance, ProvenanceRepositoryService.lineage, uuid)
        if not lineage.nodes:
            return _refusal(f"no provenance events name FlowFile {uuid}", status=404)
        view = condense(lineage, uuid, expand=expanded)   # fork/join groups collapsed unless opened
        return web.Response(text=to_svg(view), content_type="image/svg+xml")

    async def _provenance_link(self) -> Link | web.Response:
        """The running flow's provenance repository, or the answer saying why there is none."""
        if self.controller is None:
            return _refusal("the flow is still starting: provenance can be searched once it runs", status=503)
        if not hasattr(getattr(self.controller, "target", FlowController), "repositories"):
            return _refusal("this flow runs on several nodes: search each node's provenance with "
                            "'flowactors provenance search' once it stopped", status=501)
        links = await asyncio.get_running_loop().run_in_executor(None, call_now, self.controller, FlowController.repositories)
        if links.get("provenance") is None:
            return _refusal("this flow keeps no provenance repository", status=404)
        return links["provenance"]


def _refusal(message: str, status: int = 400) -> web.Response:
    return web.json_response({"error": message}, status=status)


#: the fields of an event the page's search shows
EVENT_FIELDS = ("event_id", "timestamp", "component_name", "component_id", "flowfile_uuid", "updated_size", "filename")


def _event_json(event: ProvenanceEvent) -> dict:
    """What the page's table shows of an event, and no more (a search answers up to SEARCH_LIMIT)."""
    return {name: getattr(event, name) for name in EVENT_FIELDS} | {"event_type": event.event_type.value}
