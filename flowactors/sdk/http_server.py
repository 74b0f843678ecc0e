"""What a component that listens for HTTP requests needs (ListenHTTP, the HTTP context map of
HandleHttpRequest and HandleHttpResponse): an aiohttp server on an event loop in a thread of its
own, a request body taken into a spooled temporary file a chunk at a time (memory stays bounded
whatever the body's size: past ``SPOOL_MEMORY`` it is on disk), a multipart/form-data body taken
part by part the same way, and the client certificate's names as NiFi writes them.

Contract: ``HttpListener.start`` returns only once the socket is bound (or raises
``ListenError`` saying which address and why); ``stop`` closes the socket and the loop's thread
before it returns, so the port is free again. Nothing here knows about FlowFiles.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import ssl
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Coroutine

from aiohttp import BodyPartReader, web
from cryptography import x509

#: bytes of a body (or part) kept in memory before the rest goes to a temporary file
SPOOL_MEMORY = 1024 * 1024
#: bytes read from the socket at a time
CHUNK = 64 * 1024
#: (subject, issuer) written when the client showed no certificate (NiFi's "none")
NO_CERTIFICATE = ("none", "none")
CLIENT_AUTH_NONE, CLIENT_AUTH_WANT, CLIENT_AUTH_REQUIRED = "NONE", "WANT", "REQUIRED"


class ListenError(Exception):
    """A listener could not start (the port in use, an address that is not this host's)."""


class BodyTooLarge(Exception):
    """A body (or multipart request) was larger than its limit allows."""


def spool() -> Any:
    """An empty temporary file that stays in memory up to ``SPOOL_MEMORY`` bytes."""
    return tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)


async def small_body(request: web.Request) -> bytes | None:
    """The request's body as bytes when its Content-Length says it fits in ``SPOOL_MEMORY`` (one
    read, no file: what a spooled file would keep in memory anyway); None (nothing read) when the
    length is not given or larger, or the body is content-encoded (what it unpacks to is not
    known before): then ``spool_body``."""
    length = request.content_length
    if length is None or length > SPOOL_MEMORY or request.headers.get("Content-Encoding", "identity") != "identity":
        return None
    return await request.read()


async def spool_body(request: web.Request, limit: int | None = None) -> Any:
    """The request's body in a spooled temporary file (rewound), read a chunk at a time;
    ``BodyTooLarge`` past ``limit`` bytes."""
    body, size = spool(), 0
    try:
        async for chunk in request.content.iter_chunked(CHUNK):
            size += len(chunk)
            if limit is not None and size > limit:
                raise BodyTooLarge(f"the request's body is larger than {limit} bytes")
            body.write(chunk)
    except BaseException:
        body.close()
        raise
    body.seek(0)
    return body


@dataclass
class Part:
    """One part of a multipart/form-data request: its content (a rewound spooled file) and headers."""

    content: Any
    size: int
    headers: dict[str, str]
    name: str | None
    filename: str | None
    content_type: str | None

    def attributes(self, index: int, total: int) -> dict[str, str]:
        """NiFi's attributes of a part (ListenHTTP's and HandleHttpRequest's): its headers as
        ``http.headers.multipart.*``, size, content type, name, file name, and its place (1-based)."""
        found = {f"http.headers.multipart.{k}": v for k, v in self.headers.items()}
        found.update({"http.multipart.size": str(self.size), "http.multipart.fragments.sequence.number": str(index + 1),
                      "http.multipart.fragments.total.number": str(total)})
        for key, value in (("content.type", self.content_type), ("name", self.name), ("filename", self.filename)):
            if value is not None:
                found[f"http.multipart.{key}"] = value
        return found


async def read_parts(request: web.Request, max_size: int) -> list[Part]:
    """Every part of a multipart/form-data request, each spooled; ``BodyTooLarge`` when the parts
    together pass ``max_size`` bytes (NiFi's Multipart Request Max Size); ``ValueError`` when the
    body is not multipart."""
    reader = await request.multipart()
    parts: list[Part] = []
    total = 0
    try:
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                raise ValueError("nested multipart bodies are not supported")
            content, size = spool(), 0
            parts.append(Part(content, 0, {str(k): v for k, v in part.headers.items()}, part.name, part.filename,
                              part.headers.get("Content-Type")))
            while chunk := await part.read_chunk(CHUNK):
                size += len(chunk)
                total += len(chunk)
                if total > max_size:
                    raise BodyTooLarge(f"the multipart request is larger than Multipart Request Max Size "
                                       f"({max_size} bytes)")
                content.write(chunk)
            content.seek(0)
            parts[-1].size = size
    except BaseException:
        for part in parts:
            part.content.close()
        raise
    return parts


def headers_as_sent(request: web.Request) -> dict[str, str]:
    """The request's headers by their names as the client spelt them, the first value of a
    repeated one (what a servlet's ``getHeader`` gives). ``request.headers`` would not do: aiohttp
    respells the names it knows (``X-Request-Id`` becomes ``X-Request-ID``), and a flow's regular
    expression or attribute name is written against what the client sent."""
    found: dict[str, str] = {}
    for raw_name, raw_value in request.raw_headers:
        found.setdefault(raw_name.decode("latin-1"), raw_value.decode("latin-1"))
    return found


def peer_certificate(request: web.Request) -> x509.Certificate | None:
    """The certificate the TLS client showed, or None (no TLS, or none shown)."""
    transport = request.transport
    tls = transport.get_extra_info("ssl_object") if transport is not None else None
    der = tls.getpeercert(binary_form=True) if tls is not None else None
    return x509.load_der_x509_certificate(der) if der else None


def certificate_names(request: web.Request) -> tuple[str, str] | None:
    """The (subject, issuer) distinguished names of the client's certificate (``names_of``), or
    None when it showed none."""
    certificate = peer_certificate(request)
    return names_of(certificate) if certificate is not None else None


def names_of(certificate: x509.Certificate) -> tuple[str, str]:
    """A certificate's (subject, issuer) distinguished names as NiFi formats them (RFC 1779, the
    most specific name first, ", " between)."""
    return _rfc1779(certificate.subject), _rfc1779(certificate.issuer)


#: a subject alternative name's kind, as NiFi's GeneralNameType names it
_GENERAL_NAMES = ((x509.RFC822Name, "rfc822Name"), (x509.DNSName, "dNSName"),
                  (x509.UniformResourceIdentifier, "uniformResourceIdentifier"), (x509.IPAddress, "iPAddress"),
                  (x509.DirectoryName, "directoryName"), (x509.RegisteredID, "registeredID"),
                  (x509.OtherName, "otherName"))


def alternative_names(certificate: x509.Certificate) -> list[tuple[str, str]]:
    """The certificate's subject alternative names as (NiFi's name type, the name as text), in
    the certificate's order; none when it has no such extension."""
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    found = []
    for name in names:
        kind = next(label for kind, label in _GENERAL_NAMES if isinstance(name, kind))
        value = name.value
        text = (_rfc1779(value) if isinstance(value, x509.Name) else value.dotted_string
                if isinstance(value, x509.ObjectIdentifier) else value.hex() if isinstance(value, bytes) else str(value))
        found.append((kind, text))
    return found


def _rfc1779(name: x509.Name) -> str:
    return ", ".join(rdn.rfc4514_string() for rdn in reversed(name.rdns))


def server_tls(service: Any, client_auth: str) -> ssl.SSLContext:
    """A server context of ``service`` (an ``SSLContextService``) asking clients for a certificate
    as ``client_auth`` says: REQUIRED (the handshake fails without a trusted one), WANT (asked,
    not needed), NONE; AUTO: REQUIRED when the service has a truststore, else NONE (NiFi's
    inference)."""
    if client_auth == "AUTO":
        client_auth = CLIENT_AUTH_REQUIRED if service.has_truststore() else CLIENT_AUTH_NONE
    context: ssl.SSLContext = service.create_context(server_side=True, client_auth=client_auth)
    return context


@dataclass
class Site:
    """One address to listen on: host ("" or None: every address), port (0: any free one), TLS."""

    host: str | None
    port: int
    tls: ssl.SSLContext | None = None
    #: the port it listens on once started (the one chosen when ``port`` is 0)
    bound: int = field(default=0, init=False)


class HttpListener:
    """An aiohttp application served on ``sites`` by an event loop in a thread of its own."""

    def __init__(self, name: str, make_app: Callable[[], web.Application], sites: list[Site],
                 max_header_size: int = 8190):
        self.name = name
        self.sites = sites
        self._make_app = make_app
        self._max_header_size = max_header_size
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=f"http {name}", daemon=True)
        self._runner: web.AppRunner | None = None

    def start(self) -> "HttpListener":
        """Bind every site and serve; ``ListenError`` (nothing left running) when one cannot be bound."""
        self._thread.start()
        try:
            self.run(self._start())
        except BaseException as err:
            self.stop()
            raise ListenError(f"{self.name} could not listen: {err}") from err
        return self

    async def _start(self) -> None:
        self._runner = web.AppRunner(self._make_app(), handle_signals=False, access_log=None,
                                     max_field_size=self._max_header_size, max_line_size=self._max_header_size)
        await self._runner.setup()
        for site in self.sites:
            sock = _bind(site.host, site.port)
            site.bound = sock.getsockname()[1]
            await web.SockSite(self._runner, sock, ssl_context=site.tls).start()

    async def _shutdown(self) -> None:
        """Close the sockets and connections, then end every request still being handled."""
        if self._runner is not None:
            await self._runner.cleanup()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def run(self, coroutine: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        """Run ``coroutine`` on the listener's loop and wait for its result (from another thread)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> None:
        """Have the loop run ``callback(*args)`` (from any thread); nothing when it has stopped."""
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(callback, *args)

    def stop(self) -> None:
        """Close the sockets, answer nothing more, end the loop's thread."""
        if self._thread.is_alive():
            try:
                self.run(self._shutdown())
            except Exception:   # already half down: the loop stops below either way
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)
        if not self.loop.is_running() and not self.loop.is_closed():
            self.loop.close()


def _bind(host: str | None, port: int) -> socket.socket:
    """A listening socket on ``host`` (none: every address, IPv6 and IPv4 on one socket where the
    system can) and ``port`` (0: a free one, the same for both families)."""
    if host:
        return socket.create_server((host, port), reuse_port=False, backlog=128)
    if socket.has_dualstack_ipv6():
        return socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=128)
    return socket.create_server(("", port), backlog=128)


@functools.lru_cache(maxsize=4096)   # a request's cost otherwise: its clients are few, their requests many
def plain_address(address: str | None) -> str:
    """An IP address as a client used it: an IPv4 one reached over the dual-stack socket
    (``::ffff:127.0.0.1``) without its IPv6 wrapping."""
    if not address:
        return ""
    try:
        mapped = ipaddress.ip_address(address)
    except ValueError:
        return address
    inner = mapped.ipv4_mapped if isinstance(mapped, ipaddress.IPv6Address) else None
    return str(inner) if inner is not None else address


def settle(future: "asyncio.Future[Any]", value: Any) -> None:
    """Give ``future`` its result unless it already has one (the client may have gone)."""
    if not future.done():
        future.set_result(value)


def settle_all(futures: list["asyncio.Future[Any]"], value: Any) -> None:
    """``settle`` each of ``futures`` with ``value`` (one call into the loop for many answers)."""
    for future in futures:
        settle(future, value)

