"""InvokeHTTP against real aiohttp servers this module starts on 127.0.0.1: plain HTTP, HTTPS
with the test CA and client certificates (tests/tls_material.py), and a forwarding proxy. Routes
answer each status class, echo what they were sent, stall, redirect, set cookies and stream a
large body, so the processor's routing, attributes, headers, bodies (streamed both ways) and
timeouts are checked against what went over the wire."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import socket
import ssl
import threading
import time
import tracemalloc

import pytest
from aiohttp import ClientSession, web

from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.processors import InvokeHTTP
from flowactors.services import StandardSSLContextService
from flowactors.testing import ProcessorRunner
from nifi_flows import STANDARD, connection, group, processor, snapshot
from repositories.content import FileSystemContentRepository
from tls_material import PASSWORD, make_tls_material

KEEPALIVE = 0.2  # seconds the closing server keeps an idle connection
LARGE = 48 * 1024 * 1024
PROXY_AUTH = "Basic " + base64.b64encode(b"proxy-user:proxy-secret").decode()


# ------------------------------------------------------------------------------ the servers
async def echo(request: web.Request) -> web.Response:
    digest, size = hashlib.sha256(), 0
    kept = bytearray()
    async for chunk in request.content.iter_chunked(64 * 1024):
        digest.update(chunk)
        size += len(chunk)
        if len(kept) < 65536:
            kept.extend(chunk)
    peer = request.transport.get_extra_info("peercert") if request.transport else None
    return web.json_response({
        "method": request.method, "path": request.path_qs, "headers": dict(request.headers), "size": size,
        "sha256": digest.hexdigest(), "body": base64.b64encode(bytes(kept)).decode(),
        "chunked": request.headers.get("Transfer-Encoding") == "chunked",
        "client": [v for rdn in peer["subject"] for k, v in rdn if k == "commonName"] if peer else None},
        headers={"X-Multi": "one"})


async def status(request: web.Request) -> web.Response:
    code = int(request.match_info["code"])
    response = web.Response(status=code, text=f"status {code} " + "x" * 500, content_type="text/plain",
                            charset="utf-8", headers={"X-Test": "a"})
    response.headers.add("X-Test", "b")
    return response


async def slow(request: web.Request) -> web.Response:
    await asyncio.sleep(float(request.query.get("s", "2")))
    return web.Response(text="late")


async def redirect(request: web.Request) -> web.Response:
    raise web.HTTPFound("/echo?redirected=1")


async def large(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
    response.content_length = LARGE
    await response.prepare(request)
    block = bytes(range(256)) * 256   # 64 KiB
    for _ in range(LARGE // len(block)):
        await response.write(block)
    await response.write_eof()
    return response


async def broken(request: web.Request) -> web.StreamResponse:
    """Promises 1 MiB, sends 64 KiB and hangs up."""
    response = web.StreamResponse()
    response.content_length = 1024 * 1024
    await response.prepare(request)
    await response.write(b"x" * 65536)
    await asyncio.sleep(0.05)
    request.transport.close()
    return response


async def digest(request: web.Request) -> web.Response:
    """RFC 7616 Digest (MD5, qop=auth) for user 'dan', password 'd1gest'."""
    realm, nonce = "tests", "n-0123456789"
    header = request.headers.get("Authorization", "")
    if header.startswith("Digest "):
        fields = dict(part.strip().split("=", 1) for part in header[7:].split(","))
        fields = {k: v.strip('"') for k, v in fields.items()}
        ha1 = hashlib.md5(f"dan:{realm}:d1gest".encode()).hexdigest()
        ha2 = hashlib.md5(f"{request.method}:{fields['uri']}".encode()).hexdigest()
        expected = hashlib.md5(f"{ha1}:{nonce}:{fields['nc']}:{fields['cnonce']}:auth:{ha2}".encode()).hexdigest()
        if fields.get("username") == "dan" and fields.get("response") == expected:
            return web.Response(text="welcome dan")
    return web.Response(status=401, headers={
        "WWW-Authenticate": f'Digest realm="{realm}", nonce="{nonce}", qop="auth", algorithm=MD5'})


async def cookies(request: web.Request) -> web.Response:
    response = web.Response(text=request.cookies.get("session", "none"))
    response.set_cookie("session", "s-42")
    return response


async def proxy(request: web.Request) -> web.Response:
    """A forwarding proxy (absolute-form requests, no CONNECT) that wants Basic credentials."""
    if request.headers.get("Proxy-Authorization") != PROXY_AUTH:
        return web.Response(status=407, headers={"Proxy-Authenticate": 'Basic realm="test"'})
    headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "proxy-authorization")}
    async with ClientSession() as client:
        async with client.request(request.method, str(request.url), headers=headers,
                                  data=await request.read()) as answer:
            return web.Response(status=answer.status, body=await answer.read(),
                                headers={"Via": "1.1 test-proxy", "Content-Type": answer.content_type})


async def tunnel(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A CONNECT proxy (what a client uses for an https target) that wants Basic credentials."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    method, target, _ = head[0].split(" ")
    if method != "CONNECT" or f"Proxy-Authorization: {PROXY_AUTH}" not in head:
        writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()
        return
    host, port = target.rsplit(":", 1)
    upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
    writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
        sink.close()

    await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer), return_exceptions=True)


class Servers:
    """The module's servers on one event loop in a thread: ``http``, ``https`` (client
    certificates asked for, not required), ``proxy`` (base URLs)."""

    def __init__(self, tls) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tls.ca_pem))
        server_tls.load_cert_chain(str(tls.server.cert), str(tls.server.key))
        server_tls.verify_mode = ssl.CERT_OPTIONAL
        self.runners: list[web.AppRunner] = []
        self.http = self._start(self._app(), None)
        #: a server that closes a keep-alive connection idle for KEEPALIVE seconds
        self.closing = self._start(self._app(), None, keepalive_timeout=KEEPALIVE)
        self.https = self._start(self._app(), server_tls).replace("http:", "https:")
        proxy_app = web.Application()
        proxy_app.router.add_route("*", "/{tail:.*}", proxy)
        self.proxy = self._start(proxy_app, None)

        async def start_tunnel() -> asyncio.base_events.Server:
            return await asyncio.start_server(tunnel, "127.0.0.1", 0)

        self.tunnel_server = asyncio.run_coroutine_threadsafe(start_tunnel(), self.loop).result(10)
        self.tunnel = self.tunnel_server.sockets[0].getsockname()[1]

    @staticmethod
    def _app() -> web.Application:
        app = web.Application(client_max_size=LARGE * 2)
        app.router.add_route("*", "/echo", echo)
        app.router.add_route("*", "/status/{code}", status)
        app.router.add_get("/slow", slow)
        app.router.add_get("/redirect", redirect)
        app.router.add_get("/files/large.bin", large)
        app.router.add_get("/cookies", cookies)
        app.router.add_get("/broken", broken)
        app.router.add_get("/digest", digest)
        return app

    def _start(self, app: web.Application, context, keepalive_timeout: float = 75.0) -> str:
        async def start() -> int:
            runner = web.AppRunner(app, keepalive_timeout=keepalive_timeout)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
            await site.start()
            self.runners.append(runner)
            return site._server.sockets[0].getsockname()[1]

        port = asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)
        return f"http://127.0.0.1:{port}"

    def close(self) -> None:
        for runner in self.runners:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.tunnel_server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return make_tls_material(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def servers(tls):
    started = Servers(tls)
    yield started
    started.close()


def invoke(properties, *, engine=None, services=None, **kwargs) -> ProcessorRunner:
    return ProcessorRunner(InvokeHTTP, {"Request Date Header Enabled": "False", **properties}, engine=engine,
                           services=services, **kwargs)


def echoed(runner: ProcessorRunner) -> dict:
    [body] = runner.contents("Response")
    return json.loads(body)


# ------------------------------------------------------------------------------ methods and bodies
@pytest.mark.parametrize("method", ["GET", "DELETE", "OPTIONS", "PURGE"])
def test_methods_without_a_body_send_none(servers, engine, method):
    runner = invoke({"HTTP URL": f"{servers.http}/echo?id=${{id}}", "HTTP Method": "${verb}"}, engine=engine)
    runner.enqueue(b"never sent", {"id": "7", "verb": method.lower()})
    runner.run()
    seen = echoed(runner)
    assert (seen["method"], seen["path"], seen["size"]) == (method, "/echo?id=7", 0)
    [original] = runner.output("Original")
    assert original.attributes["invokehttp.status.code"] == "200"
    assert original.attributes["invokehttp.status.message"] == "OK"
    assert original.attributes["invokehttp.request.url"] == f"{servers.http}/echo?id=7"


def test_head_gets_the_status_and_headers_and_an_empty_response(servers, engine):
    runner = invoke({"HTTP URL": f"{servers.http}/echo", "HTTP Method": "HEAD"}, engine=engine)
    runner.enqueue(b"")
    runner.run()
    assert runner.contents("Response") == [b""]
    assert runner.output("Response")[0].attributes["X-Multi"] == "one"


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH"])
def test_post_put_patch_send_the_content_with_its_length_and_type(servers, engine, method):
    runner = invoke({"HTTP URL": f"{servers.http}/echo", "HTTP Method": method}, engine=engine)
    runner.enqueue(b'{"a": 1}', {"mime.type": "application/json"})
    runner.enqueue(b"raw bytes")
    runner.run()
    first, second = [json.loads(body) for body in runner.contents("Response")]
    assert base64.b64decode(first["body"]) == b'{"a": 1}' and first["method"] == method
    assert first["headers"]["Content-Type"] == "application/json" and first["headers"]["Content-Length"] == "8"
    assert second["headers"]["Content-Type"] == "application/octet-stream" and not second["chunked"]
    assert [e.event_type.value for e in runner.events() if e.event_type.value in ("SEND", "FETCH")] == [
        "SEND", "FETCH", "SEND", "FETCH"]


def test_request_body_disabled_sends_an_empty_body(servers):
    runner = invoke({"HTTP URL": f"{servers.http}/echo", "HTTP Method": "POST", "Request Body Enabled": "false"})
    runner.enqueue(b"kept home")
    runner.run()
    echo = echoed(runner)
    assert echo["size"] == 0
    assert "Content-Type" not in echo["headers"]   # NiFi's empty body has no media type


def test_chunked_and_gzip_bodies(servers):
    runner = invoke({"HTTP URL": f"{servers.http}/echo", "HTTP Method": "POST",
                     "Request Chunked Transfer-Encoding Enabled": "true"})
    runner.enqueue(b"chunk me")
    runner.run()
    seen = echoed(runner)
    assert seen["chunked"] and "Content-Length" not in seen["headers"]
    runner = invoke({"HTTP URL": f"{servers.http}/echo", "HTTP Method": "PUT", "Request Content-Encoding": "GZIP"})
    runner.enqueue(b"squeeze me " * 1000)
    runner.run()
    seen = echoed(runner)
    assert seen["headers"]["Content-Encoding"] == "gzip" and seen["chunked"]
    # aiohttp's server inflates a gzip request body as it reads it: what it read is the content
    assert base64.b64decode(seen["body"]) == b"squeeze me " * 1000


def test_multipart_form_data_with_the_content_and_form_fields(servers):
    runner = invoke({"HTTP URL": f"{servers.http}/echo", "HTTP Method": "POST",
                     "Request Multipart Form-Data Name": "upload", "post:form:who": "${who}"})
    runner.enqueue(b"file body", {"filename": "a.txt", "who": "nifi"})
    runner.run()
    seen = echoed(runner)
    body = base64.b64decode(seen["body"]).decode()
    assert seen["headers"]["Content-Type"].startswith("multipart/form-data; boundary=")
    assert 'name="who"' in body and "nifi" in body
    assert 'name="upload"; filename="a.txt"' in body and "file body" in body


# ------------------------------------------------------------------------------ headers
def test_headers_from_dynamic_properties_attributes_auth_agent_and_date(servers):
    runner = ProcessorRunner(InvokeHTTP, {
        "HTTP URL": f"{servers.http}/echo", "X-Tenant": "${tenant}", "Request Header Attributes Pattern": "x-.*",
        "Request User-Agent": "flowactors-test/${version}", "Request Username": "ann",
        "Request Password": "s3cret"})
    runner.enqueue(b"", {"tenant": "acme", "version": "2", "x-trace": " t-1 ", "other": "not sent",
                         "invokehttp.status.code": "500"})
    runner.run()
    headers = echoed(runner)["headers"]
    assert headers["X-Tenant"] == "acme" and headers["x-trace"] == "t-1" and "other" not in headers
    assert headers["User-Agent"] == "flowactors-test/2"
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"ann:s3cret").decode()
    assert headers["Date"].endswith(" GMT") and "invokehttp.status.code" not in headers


def test_no_user_agent_unless_one_is_set(servers):
    runner = invoke({"HTTP URL": f"{servers.http}/echo"})
    runner.enqueue(b"")
    runner.run()
    assert "User-Agent" not in echoed(runner)["headers"]


# ------------------------------------------------------------------------------ routing by status
@pytest.mark.parametrize("code, relationship, penalized", [
    (201, "Original", False), (503, "Retry", True), (404, "No Retry", False), (302, "No Retry", False)])
def test_status_classes_route_as_nifi(servers, engine, code, relationship, penalized):
    runner = invoke({"HTTP URL": f"{servers.http}/status/{code}", "Response Redirects Enabled": "False"},
                    engine=engine)
    runner.enqueue(b"")
    runner.run()
    [request] = runner.output(relationship)
    assert request.attributes["invokehttp.status.code"] == str(code)
    assert (request.penalized_until > 0) == penalized
    if code // 100 == 2:
        [response] = runner.output("Response")
        assert response.attributes["X-Test"] == "a, b" and response.attributes["mime.type"].startswith("text/plain")
        assert runner.read(response).startswith(b"status 201")
        assert "invokehttp.response.body" not in request.attributes
    else:
        assert runner.output("Response") == []
        assert request.attributes["invokehttp.response.body"] == f"status {code} " + "x" * (256 - 11)


def test_no_retry_penalized_when_asked_and_response_generation_required(servers):
    runner = invoke({"HTTP URL": f"{servers.http}/status/404", "Request Failure Penalization Enabled": "true",
                     "Response Generation Required": "true"})
    runner.enqueue(b"")
    runner.run()
    [request] = runner.output("No Retry")
    assert request.penalized_until > 0
    [response] = runner.output("Response")
    assert runner.read(response).startswith(b"status 404 xxx") and len(runner.read(response)) == 511
    assert request.attributes["invokehttp.response.body"].startswith("status 404")   # the tee's first 256 bytes


def test_response_body_into_an_attribute_cut_to_its_size(servers):
    runner = invoke({"HTTP URL": f"{servers.http}/status/200", "Response Body Attribute Name": "answer",
                     "Response Body Attribute Size": "12"})
    runner.enqueue(b"")
    runner.run()
    [request] = runner.output("Original")
    assert request.attributes["answer"] == "status 200 x" and runner.output("Response") == []


def test_an_error_body_without_an_attribute_name_is_cut_to_256_bytes_whatever_the_size(servers):
    """NiFi reads Response Body Attribute Size only with Put Response Body In Attribute set: the
    invokehttp.response.body of a 4xx/5xx is otherwise cut to 256 bytes."""
    runner = invoke({"HTTP URL": f"{servers.http}/status/404", "Response Body Attribute Size": "12"})
    runner.enqueue(b"")
    runner.run()
    [request] = runner.output("No Retry")
    assert request.attributes["invokehttp.response.body"] == "status 404 " + "x" * (256 - 11)


def test_response_body_ignored_makes_an_empty_response(servers):
    runner = invoke({"HTTP URL": f"{servers.http}/status/200", "Response Body Ignored": "true"})
    runner.enqueue(b"")
    runner.run()
    [response] = runner.output("Response")
    assert runner.read(response) == b"" and response.attributes["X-Test"] == "a, b"
    assert "mime.type" not in response.attributes


def test_response_headers_onto_the_request_with_a_prefix_and_response_attributes(servers):
    runner = invoke({"HTTP URL": f"{servers.http}/status/200", "Response Header Request Attributes Enabled": "true",
                     "Response Header Request Attributes Prefix": "${p}"})
    runner.enqueue(b"", {"p": "resp."})
    runner.run()
    [request] = runner.output("Original")
    [response] = runner.output("Response")
    assert request.attributes["resp.X-Test"] == "a, b"
    assert float(request.attributes["invokehttp.request.duration"]) >= 0
    assert response.attributes["invokehttp.tx.id"] == request.attributes["invokehttp.tx.id"]
    assert response.attributes["X-Test"] == "a, b" and "resp.X-Test" not in response.attributes


def test_redirects_followed_or_not(servers):
    runner = invoke({"HTTP URL": f"{servers.http}/redirect"})
    runner.enqueue(b"")
    runner.run()
    [response] = runner.output("Response")
    assert response.attributes["invokehttp.response.url"] == f"{servers.http}/echo?redirected=1"
    runner = invoke({"HTTP URL": f"{servers.http}/redirect", "Response Redirects Enabled": "False"})
    runner.enqueue(b"")
    runner.run()
    [request] = runner.output("No Retry")
    assert request.attributes["invokehttp.status.code"] == "302"


def test_url_path_naming_strategy(servers):
    runner = invoke({"HTTP URL": f"{servers.http}/status/200", "Response FlowFile Naming Strategy": "URL_PATH"})
    runner.enqueue(b"", {"filename": "request.txt"})
    runner.run()
    assert runner.output("Response")[0].attributes["filename"] == "200"
    # named after the URL requested, not the one a redirect led to (NiFi names it from HTTP URL)
    runner = invoke({"HTTP URL": f"{servers.http}/redirect", "Response FlowFile Naming Strategy": "URL_PATH"})
    runner.enqueue(b"", {"filename": "request.txt"})
    runner.run()
    [response] = runner.output("Response")
    assert response.attributes["invokehttp.response.url"] == f"{servers.http}/echo?redirected=1"
    assert response.attributes["filename"] == "redirect"


def test_cookies_kept_only_when_accepted(servers):
    for strategy, second in (("ACCEPT_ALL", b"s-42"), ("DISABLED", b"none")):
        runner = invoke({"HTTP URL": f"{servers.http}/cookies", "Response Cookie Strategy": strategy})
        runner.enqueue(b"")
        runner.run(stop=False)   # the requests of one batch are in flight together: two triggers
        runner.enqueue(b"")
        runner.run()
        assert runner.contents("Response") == [b"none", second]


# ------------------------------------------------------------------------------ failures
def test_a_refused_connection_a_read_timeout_and_a_bad_url_go_to_failure(servers):
    runner = invoke({"HTTP URL": "${url}", "Socket Read Timeout": "300 ms"})
    runner.enqueue(b"", {"url": "http://127.0.0.1:9/nothing-listens"})
    runner.enqueue(b"", {"url": f"{servers.http}/slow?s=3"})
    runner.enqueue(b"", {"url": "ftp://127.0.0.1/file"})
    started = time.monotonic()
    runner.run()
    assert time.monotonic() - started < 2.5
    refused, late, bad = runner.output("Failure")
    assert all(f.penalized_until > 0 for f in (refused, late, bad))
    assert refused.attributes["invokehttp.java.exception.class"].startswith("aiohttp.")
    assert "Socket Read Timeout (300 ms)" in late.attributes["invokehttp.java.exception.message"]
    assert "must start with http:// or https://" in bad.attributes["invokehttp.java.exception.message"]
    assert bad.attributes["flowactors.failure.processor"] == "InvokeHTTP"


def test_a_connection_timeout_against_a_listener_whose_backlog_is_full():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    queued = []
    for _ in range(3):   # never accepted: the kernel drops the next connection's SYN
        waiting = socket.socket()
        waiting.setblocking(False)
        waiting.connect_ex(("127.0.0.1", port))
        queued.append(waiting)
    try:
        runner = invoke({"HTTP URL": f"http://127.0.0.1:{port}/", "Connection Timeout": "300 ms"})
        runner.enqueue(b"")
        started = time.monotonic()
        runner.run()
        assert time.monotonic() - started < 2
    finally:
        for waiting in [*queued, listener]:
            waiting.close()
    [failed] = runner.output("Failure")
    assert failed.attributes["invokehttp.java.exception.class"] == "aiohttp.client_exceptions.ConnectionTimeoutError"
    assert failed.attributes["invokehttp.java.exception.message"] == (
        "no connection within the Connection Timeout (300 ms)")


def test_a_body_that_breaks_off_sends_the_request_to_failure_and_no_response(servers, engine):
    runner = invoke({"HTTP URL": f"{servers.http}/broken"})
    runner.enqueue(b"")
    runner.run()
    [failed] = runner.output("Failure")
    assert failed.attributes["invokehttp.java.exception.class"] == "aiohttp.client_exceptions.ClientPayloadError"
    assert runner.output("Response") == [] and runner.output("Original") == []


def test_digest_authentication(servers):
    runner = invoke({"HTTP URL": f"{servers.http}/digest", "Request Username": "dan", "Request Password": "d1gest",
                     "Request Digest Authentication Enabled": "true"})
    runner.enqueue(b"")
    runner.run()
    assert runner.contents("Response") == [b"welcome dan"]
    runner = invoke({"HTTP URL": f"{servers.http}/digest", "Request Username": "dan", "Request Password": "wrong",
                     "Request Digest Authentication Enabled": "true"})
    runner.enqueue(b"")
    runner.run()
    assert runner.output("No Retry")[0].attributes["invokehttp.status.code"] == "401"


def test_requests_of_a_batch_are_in_flight_together(servers):
    runner = invoke({"HTTP URL": f"{servers.http}/slow?s=0.4", "Socket Idle Connections": "5"})
    for _ in range(5):
        runner.enqueue(b"")
    started = time.monotonic()
    runner.run()
    assert time.monotonic() - started < 1.5   # one after another would take 2 s
    assert runner.contents("Response") == [b"late"] * 5


def test_a_source_sends_a_get_without_a_flowfile_but_no_post(servers):
    runner = invoke({"HTTP URL": f"{servers.http}/echo"}, incoming_connection=False)
    runner.run()
    [response] = runner.output("Response")
    assert json.loads(runner.read(response))["method"] == "GET"
    assert [e.event_type.value for e in runner.events()] == ["RECEIVE"]
    runner = invoke({"HTTP URL": f"{servers.http}/echo", "HTTP Method": "POST"}, incoming_connection=False)
    runner.run()
    assert runner.output("Response") == []


def test_a_post_after_the_server_closed_the_idle_connection_goes_through(servers):
    """The client's loop runs only inside a trigger: the next trigger must notice a keep-alive
    connection the server closed meanwhile, not send a streamed body down it and fail."""
    runner = invoke({"HTTP URL": f"{servers.closing}/echo", "HTTP Method": "POST"})
    for number in range(3):
        runner.enqueue(f"body {number}".encode())
        runner.run(stop=False)
        time.sleep(KEEPALIVE * 2.5)   # the server closes the idle connection meanwhile: the behaviour under test
    runner.run()
    assert runner.output("Failure") == [] and len(runner.output("Response")) == 3
    bodies = sorted(base64.b64decode(json.loads(runner.read(f))["body"]) for f in runner.output("Response"))
    assert bodies == [b"body 0", b"body 1", b"body 2"]


def test_with_an_incoming_connection_a_trigger_finding_no_flowfile_sends_nothing(servers):
    """NiFi's rule: connected, only a FlowFile makes a request (a concurrent task that found the
    queue emptied by another sends nothing)."""
    runner = invoke({"HTTP URL": f"{servers.http}/echo"})
    runner.run()
    assert runner.output("Response") == [] and runner.events() == []


# ------------------------------------------------------------------------------ streaming
def test_a_large_response_and_request_stream_with_bounded_memory(servers, tmp_path):
    content = FileSystemContentRepository(str(tmp_path / "content"))
    runner = invoke({"HTTP URL": f"{servers.http}/files/large.bin"}, content=content)
    runner.enqueue(b"")
    tracemalloc.start()
    try:
        runner.run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    [response] = runner.output("Response")
    assert response.size == LARGE and peak < 8 * 1024 * 1024, peak
    expected = hashlib.sha256((bytes(range(256)) * 256) * (LARGE // 65536)).hexdigest()
    # the 48 MiB response is now a FlowFile: POST it back, streamed from its claim
    poster = invoke({"HTTP URL": f"{servers.http}/echo", "HTTP Method": "POST"}, content=content)
    with content.open(response.claim) as stream:
        data = stream.read()
    poster.enqueue(data)
    del data
    tracemalloc.start()
    try:
        poster.run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    seen = echoed(poster)
    assert (seen["size"], seen["sha256"]) == (LARGE, expected)
    assert peak < 12 * 1024 * 1024, peak   # the server's side of the echo runs in this process too


# ------------------------------------------------------------------------------ TLS and proxy
def ssl_service(tls, identity=None):
    properties = {"Truststore Filename": str(tls.truststore_p12), "Truststore Password": PASSWORD,
                  "Truststore Type": "PKCS12"}
    if identity is not None:
        properties.update({"Keystore Filename": str(identity.p12), "Keystore Password": PASSWORD,
                           "Keystore Type": "PKCS12"})
    return {"tls": (StandardSSLContextService, properties)}


def test_https_with_the_test_ca_and_a_client_certificate(servers, tls):
    runner = invoke({"HTTP URL": f"{servers.https}/echo", "SSL Context Service": "tls",
                     "Response Header Request Attributes Enabled": "true"}, services=ssl_service(tls, tls.client))
    runner.enqueue(b"")
    runner.run()
    [response] = runner.output("Response")
    assert json.loads(runner.read(response))["client"] == ["flowactors test client"]
    assert response.attributes["invokehttp.remote.dn"] == tls.server.dn
    assert runner.output("Original")[0].attributes["invokehttp.remote.dn"] == tls.server.dn


def test_https_without_the_ca_fails_verification(servers, tls):
    runner = invoke({"HTTP URL": f"{servers.https}/echo"})
    runner.enqueue(b"")
    runner.run()
    [failed] = runner.output("Failure")
    assert "CERTIFICATE_VERIFY_FAILED" in failed.attributes["invokehttp.java.exception.message"]


def test_a_proxy_with_basic_credentials_forwards_the_request(servers):
    host, port = servers.proxy.removeprefix("http://").split(":")
    runner = invoke({"HTTP URL": f"{servers.http}/echo?via=proxy", "Proxy Host": host, "Proxy Port": port,
                     "Proxy Username": "proxy-user", "Proxy Password": "proxy-secret"})
    runner.enqueue(b"")
    runner.run()
    [response] = runner.output("Response")
    assert response.attributes["Via"] == "1.1 test-proxy"
    assert json.loads(runner.read(response))["path"] == "/echo?via=proxy"
    runner = invoke({"HTTP URL": f"{servers.http}/echo", "Proxy Host": host, "Proxy Port": port})
    runner.enqueue(b"")
    runner.run()
    assert runner.output("No Retry")[0].attributes["invokehttp.status.code"] == "407"


def test_an_https_target_through_a_connect_proxy(servers, tls):
    runner = invoke({"HTTP URL": f"{servers.https}/echo", "SSL Context Service": "tls", "Proxy Host": "127.0.0.1",
                     "Proxy Port": str(servers.tunnel), "Proxy Username": "proxy-user",
                     "Proxy Password": "proxy-secret"}, services=ssl_service(tls))
    runner.enqueue(b"")
    runner.run()
    [response] = runner.output("Response")
    seen = json.loads(runner.read(response))
    assert "Proxy-Authorization" not in seen["headers"]   # for the proxy's CONNECT only, not the server
    assert response.attributes["invokehttp.remote.dn"] == tls.server.dn
    runner = invoke({"HTTP URL": f"{servers.https}/echo", "SSL Context Service": "tls", "Proxy Host": "127.0.0.1",
                     "Proxy Port": str(servers.tunnel)}, services=ssl_service(tls))
    runner.enqueue(b"")
    runner.run()
    assert "407" in runner.output("Failure")[0].attributes["invokehttp.java.exception.message"]


# ------------------------------------------------------------------------------ NiFi flows
def test_a_nifi_1_invokehttp_definition_runs(servers, tmp_path):
    root = group("root", "Fetch", None, None)
    generate = processor("root", "make", STANDARD + "GenerateFlowFile", {"File Size": "0 B", "Batch Size": "3",
                                                                         "Data Format": "Text",
                                                                         "Unique FlowFiles": "false",
                                                                         "Max FlowFiles": "3"})
    call = processor("root", "call", STANDARD + "InvokeHTTP", {
        "HTTP Method": "POST", "Remote URL": f"{servers.http}/echo", "Connection Timeout": "5 secs",
        "Read Timeout": "15 secs", "idle-timeout": "5 mins", "max-idle-connections": "5",
        "Include Date Header": "True", "Follow Redirects": "True", "cookie-strategy": "DISABLED",
        "disable-http2": "False", "flow-file-naming-strategy": "RANDOM", "Attributes to Send": None,
        "Useragent": "nifi-1", "SSL Context Service": None, "Proxy Type": "http", "Proxy Host": None,
        "Proxy Port": None, "invokehttp-proxy-user": None, "invokehttp-proxy-password": None,
        "Basic Authentication Username": None, "Basic Authentication Password": None,
        "Digest Authentication": "false", "Always Output Response": "false",
        "Add Response Headers to Request": "false", "Content-Type": "${mime.type}", "send-message-body": "true",
        "Use Chunked Encoding": "false", "Penalize on \"No Retry\"": "false", "use-etag": "false",
        "etag-max-cache-size": "10MB", "ignore-response-content": "false", "Put Response Body In Attribute": None,
        "Max Length To Put In Attribute": "256", "Content-Encoding": "DISABLED", "X-Flow": "nifi"},
        auto_terminate=("Original", "Retry", "No Retry", "Failure"))
    put = processor("root", "keep", STANDARD + "PutFile", {"Directory": str(tmp_path / "out"),
                                                          "Conflict Resolution Strategy": "replace",
                                                          "Create Missing Directories": "true"},
                    auto_terminate=("success", "failure"))
    root["processors"] = [generate, call, put]
    root["connections"] = [connection("root", generate, call, ("success",)),
                           connection("root", call, put, ("Response",))]
    flow = flow_from_nifi(snapshot(root, {}))
    assert flow.processors["call"].properties["HTTP URL"] == f"{servers.http}/echo"
    from flowactors import run_flow

    run_flow(flow, str(tmp_path / "repository"), engine="in-process")
    answers = [json.loads(p.read_text()) for p in (tmp_path / "out").iterdir()]
    assert len(answers) == 3
    assert {(a["method"], a["headers"]["User-Agent"], a["headers"]["X-Flow"]) for a in answers} == {
        ("POST", "nifi-1", "nifi")}


def test_importing_the_processors_loads_neither_asyncio_nor_aiohttp():
    """InvokeHTTP imports its client (aiohttp) and asyncio once a task is scheduled: every executor
    and command imports the processors, most never send a request."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import flowactors.processors, sys; "
            "assert not {'asyncio', 'aiohttp'} & set(sys.modules), {'asyncio', 'aiohttp'} & set(sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[1], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
