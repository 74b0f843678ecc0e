"""HandleHttpRequest, HandleHttpResponse and StandardHttpContextMap against real HTTP clients
(http.client) on 127.0.0.1: a round trip with status, headers and body, answered only after the
response's commit; expiry 503; the map's limits; methods and paths; multipart; back pressure;
TLS with client certificates; a NiFi export; and the pair in a flow on the in-process engine."""

from __future__ import annotations

import hashlib
import http.client
import ssl
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from flowactors import Flow, run_flow
from flowactors.processors import UpdateAttribute
from flowactors.processors.http import HandleHttpRequest, HandleHttpResponse
from flowactors.sdk.session import CommitError
from flowactors.services.http_context_map import StandardHttpContextMap
from flowactors.testing import ProcessorRunner
from repositories.content import FileSystemContentRepository
from repositories.provenance.event import ProvenanceEventType as T

from http_helpers import client_tls, in_background, keep_sending, multipart, port_is_free, request, ssl_service


class Service:
    """A HandleHttpRequest runner and a HandleHttpResponse runner sharing one context map (as the
    engine shares the flow's one instance)."""

    def __init__(self, request_properties: dict | None = None, response_properties: dict | None = None,
                 map_properties: dict | None = None, services: dict | None = None, content_root: Path | None = None):
        every = {"map": (StandardHttpContextMap, map_properties or {}), **(services or {})}

        def content(name: str) -> FileSystemContentRepository | None:   # default: in memory
            return FileSystemContentRepository(content_root / name) if content_root is not None else None

        self.requests = ProcessorRunner(HandleHttpRequest, {"Listening Port": "0", "HTTP Context Map": "map",
                                                            **(request_properties or {})}, services=every,
                                        content=content("requests"))
        self.responses = ProcessorRunner(HandleHttpResponse, {"HTTP Status Code": "200", "HTTP Context Map": "map",
                                                              **(response_properties or {})}, services=every,
                                         content=content("responses"))
        self.responses.context.services = self.requests.context.services   # the one map
        self.map = self.requests.context.services["map"]
        self.requests.processor.on_scheduled(self.requests.context)
        self.requests.scheduled = True
        self.port = self.requests.processor.port

    def taken(self, send, count: int = 1, timeout: float = 30) -> tuple[threading.Thread, dict]:
        """Start ``send()`` in a thread and trigger HandleHttpRequest until ``count`` more
        FlowFiles came out; the thread and where its answer goes (``answer`` or ``error``)."""
        before = len(self.requests.output("success"))
        thread, out = in_background(send)
        deadline = time.monotonic() + timeout
        while len(self.requests.output("success")) < before + count:
            assert time.monotonic() < deadline, "the request never came out of HandleHttpRequest"
            self.requests.run(1, stop=False)
        return thread, out

    def respond(self, flowfile, content: bytes = b"", **attributes: str) -> None:
        self.responses.enqueue(content, {**flowfile.attributes, **attributes})
        self.responses.run()

    def close(self) -> None:
        if self.requests.scheduled:
            self.requests.processor.on_stopped(self.requests.context)
        self.requests.services.disable()


@pytest.fixture
def serving():
    made: list[Service] = []

    def make(*args: Any, **kwargs: Any) -> Service:
        made.append(Service(*args, **kwargs))
        return made[-1]

    yield make
    for service in made:
        service.close()


def test_a_round_trip_with_status_headers_and_body(serving, engine):
    service = serving({"Hostname": "127.0.0.1", "Parameters to Attributes": "q, missing"},
                      response_properties={"HTTP Status Code": "${status}", "X-Echo": "${http.query.param.q}",
                                           "X-Blank": "${nothing}", "Attributes for HTTP Response": "answer\\..*"})
    thread, out = service.taken(lambda: request(service.port, "PUT", "/orders/7?q=a%20b&flag", body=b"ping",
                                                headers={"Content-Type": "text/plain", "X-Trace": "t1",
                                                         "X-Request-Id": "r7", "Cookie": "session=abc"}))
    [flowfile] = service.requests.output("success")
    attributes = flowfile.attributes
    assert service.requests.read(flowfile) == b"ping"
    assert attributes["http.method"] == "PUT" and attributes["http.request.uri"] == "/orders/7"
    assert attributes["http.query.string"] == "q=a b&flag"
    assert attributes["http.query.param.q"] == "a b" and attributes["http.query.param.flag"] == ""
    assert attributes["http.param.q"] == "a b" and "http.param.flag" not in attributes
    assert attributes["http.cookie.session.value"] == "abc"
    assert attributes["http.headers.X-Trace"] == "t1" and attributes["mime.type"] == "text/plain"
    assert attributes["http.headers.X-Request-Id"] == "r7"   # as sent: aiohttp would respell it X-Request-ID
    assert attributes["http.remote.addr"] == attributes["http.remote.host"] == "127.0.0.1"
    assert attributes["http.server.port"] == str(service.port) and "http.subject.dn" not in attributes
    identifier = attributes["http.context.identifier"]
    assert thread.is_alive()   # waiting for its response
    service.respond(flowfile, b"pong", status="201", **{"answer.kind": "created", "other": "no"})
    thread.join(10)
    status, headers, body = out["answer"]
    assert (status, body) == (201, b"pong")
    assert headers["X-Echo"] == "a b" and headers["answer.kind"] == "created"
    assert "X-Blank" not in headers and "other" not in headers
    [sent] = service.responses.output("success")
    assert sent.attributes["http.context.identifier"] == identifier
    [event] = service.responses.events()
    assert event.event_type == T.SEND and event.transit_uri == f"http://127.0.0.1@127.0.0.1:{service.port}/orders/7"
    [received] = service.requests.events()
    assert received.event_type == T.RECEIVE and received.transit_uri == event.transit_uri


def test_an_unanswered_request_expires_with_503_and_its_response_fails(serving):
    service = serving(map_properties={"Request Expiration": "1 sec"})
    thread, out = service.taken(lambda: request(service.port, "GET", "/slow"))
    thread.join(10)
    assert out["answer"][0] == 503
    [flowfile] = service.requests.output("success")
    service.respond(flowfile, b"too late")
    [failed] = service.responses.output("failure")
    assert failed.uuid != flowfile.uuid and service.responses.output("success") == []


def test_a_flowfile_without_a_context_or_with_a_bad_status_fails(serving):
    service = serving(response_properties={"HTTP Status Code": "${status}"})
    service.responses.enqueue(b"no context", {"status": "200"})
    thread, out = service.taken(lambda: request(service.port, "GET", "/x"))
    [flowfile] = service.requests.output("success")
    service.respond(flowfile, status="two hundred")
    service.responses.run()
    assert len(service.responses.output("failure")) == 2
    service.respond(flowfile, b"now", status="202")   # the request still waited
    thread.join(10)
    assert out["answer"][:3:2] == (202, b"now")


def test_the_response_is_sent_only_after_its_commit(serving, monkeypatch):
    service = serving()
    thread, out = service.taken(lambda: request(service.port, "GET", "/x"))
    [flowfile] = service.requests.output("success")

    def refuse(batch):
        raise CommitError("refused for the test")

    monkeypatch.setattr(service.responses.backend, "commit", refuse)
    service.responses.enqueue(b"first try", flowfile.attributes)
    service.responses.run()
    assert service.responses.output("success") == [] and service.responses.input_count == 1   # rolled back
    time.sleep(0.2)
    assert thread.is_alive() and "answer" not in out   # nothing sent: the commit failed
    monkeypatch.undo()
    service.responses.run()   # the FlowFile went back to its queue: answered now
    thread.join(10)
    assert out["answer"][:3:2] == (200, b"first try")


def test_methods_paths_and_the_queue_limit(serving):
    service = serving({"Allow DELETE": "false", "Additional HTTP Methods": "purge, report",
                       "Allowed Paths": "/api/.*", "Container Queue Size": "1"})
    assert request(service.port, "DELETE", "/api/x")[0] == 405
    assert request(service.port, "OPTIONS", "/api/x")[0] == 405   # Allow OPTIONS defaults to false
    assert request(service.port, "GET", "/elsewhere")[0] == 404
    waiting = threading.Thread(target=lambda: request(service.port, "PURGE", "/api/one"), daemon=True)
    waiting.start()
    deadline = time.monotonic() + 10
    while not service.map._servers["HandleHttpRequest"].queue:   # the first waits in the queue ...
        assert time.monotonic() < deadline
        time.sleep(0.01)
    status, _, body = request(service.port, "REPORT", "/api/two")
    assert status == 503 and b"Queue Full" in body   # ... and a second finds it full
    service.requests.run(1, stop=False)
    [flowfile] = service.requests.output("success")
    assert flowfile.attributes["http.method"] == "PURGE"
    service.respond(flowfile)
    waiting.join(10)


def test_past_the_most_outstanding_requests_a_request_gets_503(serving):
    service = serving(map_properties={"Maximum Outstanding Requests": "1"})
    first, _ = service.taken(lambda: request(service.port, "GET", "/one"))
    second = {}
    thread = threading.Thread(target=lambda: second.update(answer=request(service.port, "GET", "/two")), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while thread.is_alive():
        assert time.monotonic() < deadline
        service.requests.run(1, stop=False)
    assert second["answer"][0] == 503 and len(service.requests.output("success")) == 1
    service.respond(service.requests.output("success")[0])
    first.join(10)


def test_multipart_gives_a_flowfile_per_part_with_one_context(serving):
    service = serving()
    body, content_type = multipart([("a", None, b"one"), ("b", "b.txt", b"two")])
    thread, out = service.taken(lambda: request(service.port, "POST", "/form", body=body,
                                                headers={"Content-Type": content_type}), count=2)
    first, second = service.requests.output("success")
    assert (service.requests.read(first), service.requests.read(second)) == (b"one", b"two")
    assert first.attributes["http.context.identifier"] == second.attributes["http.context.identifier"]
    assert second.attributes["http.multipart.filename"] == "b.txt"
    assert second.attributes["http.multipart.fragments.total.number"] == "2"
    service.respond(first, b"got both")
    service.respond(second, b"again")
    thread.join(10)
    assert out["answer"][2] == b"got both"
    assert len(service.responses.output("failure")) == 1   # one request, one response


def test_two_flowfiles_of_one_request_in_one_batch_answer_it_once_with_the_first(serving):
    """As NiFi: the first FlowFile answers the request; the second finds it answered and fails."""
    service = serving()
    body, content_type = multipart([("a", None, b"one"), ("b", None, b"two")])
    thread, out = service.taken(lambda: request(service.port, "POST", "/form", body=body,
                                                headers={"Content-Type": content_type}), count=2)
    first, second = service.requests.output("success")
    service.responses.enqueue(b"first answer", dict(first.attributes))
    service.responses.enqueue(b"second answer", dict(second.attributes))
    service.responses.run()   # one trigger, one batch
    thread.join(10)
    assert out["answer"][2] == b"first answer"
    assert service.responses.contents("success") == [b"first answer"]
    assert service.responses.contents("failure") == [b"second answer"]


def test_back_pressure_answers_503(serving):
    service = serving()
    success = service.requests.queues["success"].link.target
    success.config = success.config.__class__(**{**success.config.__dict__, "back_pressure_objects": 1})
    thread, _ = service.taken(lambda: request(service.port, "GET", "/one"))
    service.requests.run(1, stop=False)   # success is full now
    assert request(service.port, "GET", "/two")[0] == 503
    service.respond(service.requests.output("success")[0])
    thread.join(10)


def test_a_large_body_goes_both_ways_in_chunks(serving):
    service = serving()
    body = bytes(range(256)) * 20_000   # 5 MB: several chunks each way
    thread, out = service.taken(lambda: request(service.port, "POST", "/big", body=body))
    [flowfile] = service.requests.output("success")
    assert flowfile.size == len(body) and service.requests.read(flowfile) == body
    service.respond(flowfile, body[::-1])
    thread.join(30)
    assert out["answer"][2] == body[::-1]


def test_a_large_body_goes_both_ways_in_bounded_memory(serving, tmp_path):
    """The map spools a body (memory up to 1 MB, the rest on disk) and it travels to
    HandleHttpRequest, and back from HandleHttpResponse, in chunks: 16 MB each way never has more
    than a few MB in memory at once (content repositories on disk, the client streaming too)."""
    service = serving(content_root=tmp_path)
    chunk, count = bytes(range(256)) * 1024, 64   # 16 MB
    digest = hashlib.sha256(chunk * count).hexdigest()

    def send() -> tuple[int, str]:
        connection = http.client.HTTPConnection("127.0.0.1", service.port, timeout=60)
        try:
            connection.request("POST", "/big", body=(chunk for _ in range(count)))   # chunked
            response = connection.getresponse()
            hashed = hashlib.sha256()
            while block := response.read(1 << 16):
                hashed.update(block)
            return response.status, hashed.hexdigest()
        finally:
            connection.close()

    tracemalloc.start()
    try:
        thread, out = service.taken(send)
        _, peak_in = tracemalloc.get_traced_memory()
        [flowfile] = service.requests.output("success")
        data = chunk * count
        service.responses.enqueue(data, dict(flowfile.attributes))
        del data
        tracemalloc.reset_peak()
        service.responses.run()
        thread.join(60)
        _, peak_out = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.get("answer") == (200, digest), out
    assert flowfile.size == len(chunk) * count
    with service.requests.content.open(flowfile.claim) as stream:
        hashed = hashlib.sha256()
        while block := stream.read(1 << 20):
            hashed.update(block)
    assert hashed.hexdigest() == digest
    for way, peak in (("in", peak_in), ("out", peak_out)):
        assert peak < 6 * 1024 * 1024, f"{peak} bytes at the peak taking a 16 MB body {way}"


def test_tls_with_a_needed_client_certificate(serving, tmp_path):
    from tls_material import make_tls_material

    tls = make_tls_material(tmp_path / "tls")
    service = serving({"SSL Context Service": "ssl", "Client Authentication": "Need Authentication"},
                      services={"ssl": ssl_service(tls)})
    thread, out = service.taken(lambda: request(service.port, "GET", "/secure", tls=client_tls(tls, tls.client)))
    [flowfile] = service.requests.output("success")
    assert flowfile.attributes["http.subject.dn"] == "CN=flowactors test client, O=flowactors tests"
    assert flowfile.attributes["http.issuer.dn"] == "CN=flowactors test CA, O=flowactors tests"
    service.respond(flowfile, b"hello client")
    thread.join(10)
    assert out["answer"][2] == b"hello client"
    assert service.responses.events()[0].transit_uri.startswith("https://")
    assert not any(k.startswith("http.certificate.sans.") for k in flowfile.attributes)   # the client's has none
    with pytest.raises((ssl.SSLError, ConnectionError)):
        request(service.port, "GET", "/secure", tls=client_tls(tls))


def test_subject_alternative_names_as_nifi_names_them(tmp_path):
    from cryptography import x509

    from flowactors.sdk.http_server import alternative_names
    from tls_material import make_tls_material

    server = make_tls_material(tmp_path / "tls").server   # its certificate names 127.0.0.1 and localhost
    certificate = x509.load_pem_x509_certificates(server.cert.read_bytes())[0]
    assert alternative_names(certificate) == [("iPAddress", "127.0.0.1"), ("dNSName", "localhost")]


# ---------------------------------------------------------------------------------- flows
def request_response_flow(port: int) -> Flow:
    flow = Flow("service")
    flow.add_service(StandardHttpContextMap, "map")
    handle = flow.add(HandleHttpRequest, "request", properties={"Listening Port": str(port),
                                                                "HTTP Context Map": "map"})
    shout = flow.add(UpdateAttribute, "shout", properties={"reply": "${http.query.param.name:toUpper()}"})
    answer = flow.add(HandleHttpResponse, "response", properties={
        "HTTP Status Code": "200", "HTTP Context Map": "map", "X-Reply": "${reply}"},
        auto_terminate=["success", "failure"])
    flow.connect(handle, shout)
    flow.connect(shout, answer)
    return flow


def test_the_pair_runs_in_a_flow_on_the_in_process_engine(tmp_path):
    from real_services import free_port

    port = free_port()
    answers, ask = keep_sending(3, lambda i: request(port, "POST", f"/hello?name=n{i}", body=b"hi"))
    final = run_flow(request_response_flow(port), tmp_path / "repository", engine="in-process", timeout=60,
                     on_started=ask, until=lambda s: len(answers) == 3)
    assert not final.get("timed_out"), final
    assert [(status, headers["X-Reply"], body) for status, headers, body in answers] == [
        (200, f"N{i}", b"hi") for i in range(3)]
    assert port_is_free(port)   # the map closed its server when the flow stopped


def test_a_nifi_export_with_the_context_map_loads_and_runs(tmp_path):
    from flowactors.driver.nifi_export import flow_from_nifi
    from nifi_flows import STANDARD, connection, group, processor, snapshot, uses
    from real_services import free_port

    port = free_port()
    handle = processor("root", "request", STANDARD + "HandleHttpRequest", {
        "Listening Port": str(port), "Hostname": None, "SSL Context Service": None, "HTTP Context Map": "svc-map",
        "Allowed Paths": None, "Default URL Character Set": "UTF-8", "Allow GET": "true", "Allow POST": "true",
        "Allow PUT": "true", "Allow DELETE": "true", "Allow HEAD": "false", "Allow OPTIONS": "false",
        "Maximum Threads": "200", "Additional HTTP Methods": None, "Client Authentication": "No Authentication",
        "container-queue-size": "50", "multipart-request-max-size": "1 MB",
        "multipart-read-buffer-size": "512 KB", "parameters-to-attributes": None})
    answer = processor("root", "response", STANDARD + "HandleHttpResponse", {
        "HTTP Status Code": "201", "HTTP Context Map": "svc-map",
        "Attributes to add to the HTTP Response (Regex)": "http\\.method"}, auto_terminate=("success", "failure"))
    for component in (handle, answer):
        uses(component, "HTTP Context Map")
    services = [{"identifier": "svc-map", "name": "map", "scheduledState": "ENABLED",
                 "type": "org.apache.nifi.http.StandardHttpContextMap",
                 "properties": {"Maximum Outstanding Requests": "5000", "Request Expiration": "1 min"}}]
    flow = flow_from_nifi(snapshot(group("root", "web", None, None, processors=[handle, answer],
                                         controllerServices=services,
                                         connections=[connection("root", handle, answer, ("success",))]), {}))
    assert flow.services["map"].type is StandardHttpContextMap
    assert flow.processors["request"].properties["Container Queue Size"] == "50"
    assert flow.processors["response"].properties["Attributes for HTTP Response"] == "http\\.method"
    assert flow.processors["response"].properties["HTTP Context Map"] == "map"
    answers, ask = keep_sending(2, lambda i: request(port, "PUT", f"/item/{i}", body=f"item {i}".encode()))
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60, on_started=ask,
                     until=lambda s: len(answers) == 2)
    assert not final.get("timed_out"), final
    assert [(status, headers["http.method"], body) for status, headers, body in answers] == [
        (201, "PUT", f"item {i}".encode()) for i in range(2)]


@pytest.mark.parametrize("port", ["65536", "-1", "http", "\u00b2"])
def test_a_listening_port_that_is_not_a_port_number_is_refused_in_one_sentence(port):
    from flowactors.processors.http import ListenHTTP

    for kind, values in ((HandleHttpRequest, {"HTTP Context Map": "map"}), (ListenHTTP, {})):
        assert kind.validate_properties({"Listening Port": port, **values}) == [
            "property 'Listening Port': must be a port number (0 to 65535)"]


def test_a_multipart_request_too_large_is_413_and_a_broken_one_400_and_nothing_is_taken(serving):
    service = serving({"Multipart Request Max Size": "1 KB"})
    body, content_type = multipart([("big", None, b"b" * 2000)])
    status, _, text = request(service.port, "POST", "/form", body=body, headers={"Content-Type": content_type})
    assert status == 413 and b"Multipart Request Max Size" in text
    status, _, text = request(service.port, "POST", "/form", body=b"no parts here",
                              headers={"Content-Type": "multipart/form-data; boundary=xyz"})
    assert status == 400 and text.startswith(b"Stream Processing Failed")
    service.requests.run(1, stop=False)
    assert service.requests.output("success") == [] and service.map._registered == {}
