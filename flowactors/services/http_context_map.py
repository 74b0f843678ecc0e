"""StandardHttpContextMap: the HTTP requests HandleHttpRequest took, waiting for the response
HandleHttpResponse gives them (NiFi's ``StandardHttpContextMap``; docs/services.md, docs/http.md).

The service is shared (``shared_state``): the flow has one instance (an actor on Ray, an object in
process), and it owns the HTTP servers too, so a waiting request, its socket and the server that
answers it live in one place while HandleHttpRequest and HandleHttpResponse run wherever their
executors are. Each server runs on an event loop in a thread of its own
(``flowactors.sdk.http_server``); a request's body is spooled (memory up to 1 MB, then disk) before
it waits in its server's queue, and travels to HandleHttpRequest in chunks (``read``); a response
body comes back in chunks (``write``) into a spool, sent when ``complete`` is called.

A request is *registered* when HandleHttpRequest takes it: at most Maximum Outstanding Requests
are (a request past that is answered 503), and one still unanswered Request Expiration after it
was taken is answered 503 and forgotten. Nothing here survives a restart: the requests' sockets
do not either.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import urllib.parse
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Mapping

from flowactors.sdk.processor import PropertyDescriptor, validators
from flowactors.sdk.services import ControllerService, HttpContextMap, ServiceContext

log = logging.getLogger(__name__)

#: the longest pause between two looks for expired requests (NiFi's)
EXPIRY_LOOK = 5.0


@dataclass
class _Request:
    """One request: its attributes and body parts, then the answer the server awaits."""

    id: str
    owner: str
    attributes: dict[str, str]
    parts: list[Any]   # http_server.Part (a plain body is one part without attributes)
    multipart: bool
    future: Any
    loop: Any
    taken: float = 0.0
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None

    def close_body(self) -> None:
        for part in self.parts:
            part.content.close()
        self.parts = []


class _Server:
    """One owner's server: its settings, the listener, the requests waiting to be taken."""

    def __init__(self, owner: str, settings: Mapping[str, Any]):
        self.owner = owner
        self.settings = dict(settings)
        self.users = 1
        self.queue: deque[_Request] = deque()
        self.room = True
        self.listener: Any = None
        path = settings.get("paths")
        self.paths = re.compile(path) if path else None
        self.methods = {m.upper() for m in settings.get("methods", ())}


class StandardHttpContextMap(ControllerService, HttpContextMap):
    """The flow's HTTP requests waiting for their responses, and the servers that take them."""

    description = "Holds the HTTP requests HandleHttpRequest takes until HandleHttpResponse answers them."
    shared_state = True
    properties = (
        PropertyDescriptor("Maximum Outstanding Requests", "The most requests waiting for a response at once; "
                           "one more is answered 503", required=True, default="5000",
                           validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Request Expiration", "How long a taken request waits for its response before it is "
                           "answered 503", required=True, default="1 min", validator=validators.DURATION),
    )

    def on_enabled(self, context: ServiceContext) -> None:
        self._most = context.property("Maximum Outstanding Requests").as_int() or 5000
        self._expiration = context.property("Request Expiration").as_duration() or 60.0
        self._lock = threading.Condition()
        self._servers: dict[str, _Server] = {}
        self._registered: dict[str, _Request] = {}
        self._stopping = threading.Event()
        self._expiry = threading.Thread(target=self._expire_loop, name=f"{context.name} expiry", daemon=True)
        self._expiry.start()

    def on_disabled(self, context: ServiceContext) -> None:
        self._stopping.set()
        self._expiry.join(30)
        for owner in list(self._servers):
            self._stop_server(self._servers.pop(owner))
        for request in list(self._registered.values()):
            self._answer(request, 503)
        self._registered.clear()

    # ------------------------------------------------------------------ servers
    def listen(self, owner: str, settings: Mapping[str, Any]) -> int:
        from flowactors.sdk import http_server   # aiohttp loads only where a flow listens

        with self._lock:
            server = self._servers.get(owner)
            if server is not None:
                server.users += 1
                return server.listener.sites[0].bound
            server = _Server(owner, settings)
            tls = None
            ssl_service = settings.get("ssl")
            if ssl_service is not None:
                tls = http_server.server_tls(ssl_service, settings.get("client_auth", "NONE"))
            site = http_server.Site(settings.get("host"), int(settings["port"]), tls)
            server.listener = http_server.HttpListener(
                owner, lambda: self._app(server), [site], int(settings.get("header_size", 8192))).start()
            self._servers[owner] = server
            return site.bound

    def unlisten(self, owner: str) -> None:
        with self._lock:
            server = self._servers.get(owner)
            if server is None:
                return
            server.users -= 1
            if server.users > 0:
                return
            del self._servers[owner]
        self._stop_server(server)

    def _stop_server(self, server: _Server) -> None:
        """Answer 503 to the requests still waiting to be taken, then close the socket."""
        with self._lock:
            waiting, server.queue = list(server.queue), deque()
        for request in waiting:
            request.close_body()
            self._answer(request, 503)
        server.listener.stop()

    def _app(self, server: _Server) -> Any:
        from aiohttp import web

        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._handle(server, request)

        app = web.Application(client_max_size=0)
        app.router.add_route("*", "/{path:.*}", handle)
        return app

    async def _handle(self, server: _Server, request: Any) -> Any:
        """Check, spool and queue one request, then wait for its answer and send it."""
        import asyncio

        from aiohttp import web

        from flowactors.sdk.http_server import BodyTooLarge, Part, read_parts, spool_body

        if request.method.upper() not in server.methods:
            return web.Response(status=405, text="Method Not Allowed")
        if server.paths is not None and not server.paths.fullmatch(request.path):
            return web.Response(status=404, text="Path Not Found")
        if not server.room:
            return web.Response(status=503, text="No Available Relationships")
        multipart = "multipart/form-data" in request.headers.get("Content-Type", "")
        try:
            if multipart:
                parts = await read_parts(request, int(server.settings.get("multipart_max", 1024 * 1024)))
            else:
                body = await spool_body(request)
                parts = [Part(body, body.seek(0, 2), {}, None, None, None)]
                body.seek(0)
        except BodyTooLarge as err:
            return web.Response(status=413, text=str(err))
        except Exception as err:
            return web.Response(status=400, text=f"Stream Processing Failed: {err}")
        pending = _Request(str(uuid.uuid4()), server.owner, _attributes(request, server.settings), parts, multipart,
                           asyncio.get_running_loop().create_future(), asyncio.get_running_loop())
        with self._lock:
            full = not server.room or len(server.queue) >= int(server.settings.get("queue_size", 50))
            if not full:
                server.queue.append(pending)
                self._lock.notify_all()
        if full:
            pending.close_body()
            return web.Response(status=503, text="Request Queue Full")
        status = await pending.future
        return await self._send(request, pending, status)

    @staticmethod
    async def _send(request: Any, pending: _Request, status: int) -> Any:
        """The answer: an error status alone, or the staged response with its body streamed."""
        from aiohttp import web

        from flowactors.sdk.http_server import CHUNK

        if pending.body is None:
            return web.Response(status=status, text="" if status < 400 else "Service Unavailable")
        response = web.StreamResponse(status=status, headers=pending.headers)
        response.content_length = pending.body.seek(0, 2)
        pending.body.seek(0)
        try:
            await response.prepare(request)
            while chunk := pending.body.read(CHUNK):
                await response.write(chunk)
            await response.write_eof()
        finally:
            pending.body.close()
        return response

    # ------------------------------------------------------------------ HandleHttpRequest's side
    def take(self, owner: str, most: int, wait: float, room: bool) -> list[dict[str, Any]]:
        taken: list[_Request] = []
        refused: list[_Request] = []
        with self._lock:
            server = self._servers.get(owner)
            if server is None:
                return []
            server.room = room
            if not room:
                refused, server.queue = list(server.queue), deque()
            elif not server.queue:
                self._lock.wait(wait)
            while room and server.queue and len(taken) < most:
                request = server.queue.popleft()
                if len(self._registered) >= self._most:
                    refused.append(request)
                    continue
                request.taken = time.monotonic()
                self._registered[request.id] = request
                taken.append(request)
        for request in refused:
            request.close_body()
            self._answer(request, 503)
        return [{"id": r.id, "attributes": r.attributes,
                 "parts": [(p.size, p.attributes(i, len(r.parts)) if r.multipart else {}) for i, p in enumerate(r.parts)]}
                for r in taken]

    def read(self, identifier: str, part: int, offset: int, size: int) -> bytes:
        request = self._request(identifier)
        if request is None or part >= len(request.parts):
            raise LookupError(f"the HTTP request {identifier} is no longer waiting (expired or answered)")
        content = request.parts[part].content
        with self._lock:   # one spool, maybe read by several callers: seek and read together
            content.seek(offset)
            return content.read(size)

    def release(self, identifier: str) -> None:
        request = self._request(identifier)
        if request is not None:
            with self._lock:
                request.close_body()

    def fail(self, identifier: str, status: int) -> None:
        with self._lock:
            request = self._registered.pop(identifier, None)
        if request is not None:
            request.close_body()
            self._answer(request, status)

    # ------------------------------------------------------------------ HandleHttpResponse's side
    def respond(self, identifier: str, status: int, headers: Mapping[str, str]) -> bool:
        from flowactors.sdk.http_server import spool

        with self._lock:
            request = self._registered.get(identifier)
            if request is None:
                return False
            if request.body is not None:
                request.body.close()
            request.status, request.headers, request.body = status, dict(headers), spool()
            return True

    def write(self, identifier: str, chunk: bytes) -> None:
        with self._lock:
            request = self._registered.get(identifier)
            if request is None or request.body is None:
                raise LookupError(f"the HTTP request {identifier} has no response under way (expired or answered)")
            request.body.write(chunk)

    def complete(self, identifier: str) -> bool:
        with self._lock:
            request = self._registered.pop(identifier, None)
        if request is None or request.body is None or request.status is None:
            return False
        request.close_body()
        self._answer(request, request.status)
        return True

    def discard(self, identifier: str) -> None:
        with self._lock:
            request = self._registered.get(identifier)
            if request is not None and request.body is not None:
                request.body.close()
                request.body = request.status = None

    # ------------------------------------------------------------------ expiry
    def _expire_loop(self) -> None:
        while not self._stopping.wait(min(self._expiration / 2, EXPIRY_LOOK)):
            self.expire()

    def expire(self) -> int:
        """Answer 503 to every registered request older than Request Expiration; how many."""
        cutoff = time.monotonic() - self._expiration
        with self._lock:
            expired = [r for r in self._registered.values() if r.taken < cutoff]
            for request in expired:
                del self._registered[request.id]
        for request in expired:
            log.warning("HTTP request %s from %s timed out; answering 503", request.id,
                        request.attributes.get("http.remote.addr"))
            request.close_body()
            if request.body is not None:
                request.body.close()
                request.body = None
            self._answer(request, 503)
        return len(expired)

    def _request(self, identifier: str) -> _Request | None:
        with self._lock:
            return self._registered.get(identifier)

    @staticmethod
    def _answer(request: _Request, status: int) -> None:
        from flowactors.sdk.http_server import settle

        if not request.loop.is_closed():
            request.loop.call_soon_threadsafe(settle, request.future, status)


def _attributes(request: Any, settings: Mapping[str, Any]) -> dict[str, str]:
    """NiFi's HandleHttpRequest attributes of a request (docs/http.md lists them)."""
    from flowactors.sdk.http_server import alternative_names, headers_as_sent, names_of, peer_certificate, plain_address

    charset = request.charset or settings.get("charset", "UTF-8")
    sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
    local, remote = plain_address(sockname[0] if sockname else ""), plain_address(request.remote)
    found = {"http.method": request.method, "http.local.addr": local, "http.local.name": local,
             "http.remote.host": remote, "http.remote.addr": remote,
             "http.protocol": f"HTTP/{request.version.major}.{request.version.minor}",
             "http.request.uri": request.path, "http.request.url": str(request.url.with_query(None)),
             "http.servlet.path": request.path, "http.context.path": "", "http.dispatcher.type": "REQUEST",
             "http.server.name": request.url.host or "", "http.server.port": str(sockname[1] if sockname else "")}
    if request.headers.get("Content-Type"):
        found["mime.type"] = request.headers["Content-Type"]
    if request.charset:
        found["http.character.encoding"] = request.charset
    query = request.query_string
    if query:
        found["http.query.string"] = urllib.parse.unquote_plus(query, encoding=charset)
        for key, value in urllib.parse.parse_qsl(query, keep_blank_values=True, encoding=charset):
            found[f"http.query.param.{key}"] = value
            if key in settings.get("parameters", ()):
                found[f"http.param.{key}"] = value
    for key, value in headers_as_sent(request).items():
        found[f"http.headers.{key}"] = value
    for key, value in request.cookies.items():
        found[f"http.cookie.{key}.value"] = value
    certificate = peer_certificate(request)
    if certificate is not None:
        found["http.subject.dn"], found["http.issuer.dn"] = names_of(certificate)
        for index, (kind, name) in enumerate(alternative_names(certificate)):
            found[f"http.certificate.sans.{index}.nameType"] = kind
            found[f"http.certificate.sans.{index}.name"] = name
    return {str(k): str(v) for k, v in found.items()}
