"""ListenHTTP against real HTTP clients (http.client) on 127.0.0.1: the body a FlowFile answered only
after its commit, FlowFile Stream v3 from flowactors' own MergeContent, multipart, back pressure
503, a failed commit 500 with nothing kept, a large body streamed, the holds protocol, TLS with
client authentication and the DN patterns, a NiFi export, and a whole flow on the in-process engine."""

from __future__ import annotations

import gzip
import hashlib
import ssl
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import pytest

from flowactors import Flow, run_flow
from flowactors.processors import MergeContent, PutFile
from flowactors.processors.http import ListenHTTP
from flowactors.sdk.session import CommitError
from flowactors.testing import ProcessorRunner
from repositories.content import FileSystemContentRepository
from repositories.provenance.event import ProvenanceEventType as T

from http_helpers import BASE, client_tls, in_background, keep_sending, multipart, port_is_free, request, ssl_service


def exchange(runner: ProcessorRunner, send: Callable[[], Any], timeout: float = 60) -> Any:
    """``send()`` in a thread while the runner is triggered, as the engine would; its result."""
    thread, out = in_background(send)
    deadline = time.monotonic() + timeout
    while thread.is_alive():
        assert time.monotonic() < deadline, "the request was not answered"
        runner.run(1, stop=False)
    if "error" in out:
        raise out["error"]
    return out["answer"]


@pytest.fixture
def listening():
    """Start a ListenHTTP runner on a free port: ``listening(properties, **runner_options)``."""
    started: list[ProcessorRunner] = []

    def start(properties: dict | None = None, **options: Any) -> ProcessorRunner:
        runner = ProcessorRunner(ListenHTTP, {"Listening Port": "0", **(properties or {})}, **options)
        runner.processor.on_scheduled(runner.context)
        runner.scheduled = True
        started.append(runner)
        return runner

    yield start
    for runner in started:
        if runner.scheduled:
            runner.processor.on_stopped(runner.context)


def test_a_post_becomes_a_flowfile_answered_once_committed(listening, engine):
    runner = listening({"HTTP Headers for Attributes": "X-Color|X-Request-Id", "Return Code": "201"})
    status, _, _ = exchange(runner, lambda: request(runner.processor.port, "POST", body=b"hello", headers={
        "X-Color": "blue", "X-Request-Id": "r7", "Other": "no", "filename": "greeting.txt", "uuid": "sender-1"}))
    assert status == 201
    [flowfile] = runner.output("success")
    assert runner.read(flowfile) == b"hello"
    attributes = flowfile.attributes
    assert attributes["X-Color"] == "blue" and "Other" not in attributes
    assert attributes["X-Request-Id"] == "r7"   # matched and named as sent (aiohttp respells it X-Request-ID)
    assert attributes["filename"] == "greeting.txt" and attributes["uuid"] != "sender-1"
    assert attributes["restlistener.remote.source.host"] == "127.0.0.1"
    assert attributes["restlistener.request.uri"] == BASE
    assert attributes["restlistener.remote.user.dn"] == attributes["restlistener.remote.issuer.dn"] == "none"
    [event] = runner.events()
    assert event.event_type == T.RECEIVE and event.transit_uri.endswith(BASE)
    assert event.source_system_flowfile_id == "urn:nifi:sender-1"


def test_requests_waiting_together_are_taken_by_one_trigger_and_answered_by_its_commit(listening):
    runner = listening()
    port, answers = runner.processor.port, []
    senders = [threading.Thread(target=lambda i=i: answers.append(request(port, "POST", body=f"b{i}".encode())[0]))
               for i in range(5)]
    for sender in senders:
        sender.start()
    deadline = time.monotonic() + 30
    while len(runner.processor._inbox) < 5:   # all five read and waiting for a trigger
        assert time.monotonic() < deadline, "the requests did not reach the inbox"
        time.sleep(0.01)
    runner.run(1, stop=False)
    for sender in senders:
        sender.join(30)
    assert answers == [200] * 5
    assert sorted(runner.read(f) for f in runner.output("success")) == [f"b{i}".encode() for i in range(5)]
    assert len(runner.events()) == 5


def test_a_chunked_body_without_a_length_is_spooled_and_taken_whole(listening):
    runner = listening()
    chunks = [b"first ", b"second ", b"third"]   # http.client sends an iterable chunked
    status, _, _ = exchange(runner, lambda: request(runner.processor.port, "POST", body=iter(chunks)))
    assert status == 200
    [flowfile] = runner.output("success")
    assert runner.read(flowfile) == b"first second third"


def test_what_is_not_a_post_and_the_health_check(listening):
    runner = listening({"Listening Port for Health Check Requests": "0", "Base Path": "in/data"})
    port, health = runner.processor.port, runner.processor.health_port
    assert request(port, "GET", "/in/data")[0] == 405
    assert request(port, "PUT", "/in/data", body=b"x")[0] == 405
    status, headers, _ = request(port, "HEAD", "/in/data")
    assert status == 200 and headers["x-nifi-transfer-protocol-version"] == "3"
    assert "application/flowfile-v3" in headers["Accept"]
    assert request(port, "POST", "/elsewhere", body=b"x")[0] == 404
    assert request(port, "GET", "/in/data/healthcheck")[2] == b"OK"
    assert request(health, "GET", "/in/data/healthcheck")[:3:2] == (200, b"OK")
    assert request(health, "POST", "/in/data", body=b"x")[0] == 404   # only the health check there
    assert runner.output("success") == []


def test_flowfile_stream_v3_from_merge_content_unpacks_into_its_flowfiles(listening, engine):
    merge = ProcessorRunner(MergeContent, {"Merge Format": "FlowFile Stream, v3"})
    for index, content in enumerate([b"first", b"", b"third"]):
        merge.enqueue(content, {"filename": f"f{index}.txt", "colour": f"c{index}"})
    merge.run()
    [package] = merge.output("merged")
    runner = listening()
    status, _, _ = exchange(runner, lambda: request(runner.processor.port, "POST", body=merge.read(package),
                                                    headers={"Content-Type": "application/flowfile-v3",
                                                             "filename": "ignored"}))
    assert status == 200
    out = runner.output("success")
    assert [runner.read(f) for f in out] == [b"first", b"", b"third"]
    assert [(f.attributes["filename"], f.attributes["colour"]) for f in out] == [
        ("f0.txt", "c0"), ("f1.txt", "c1"), ("f2.txt", "c2")]
    originals = {f.uuid for f in merge.output("original")}
    assert not originals & {f.uuid for f in out}   # the packaged uuids are the senders', not taken
    assert {e.source_system_flowfile_id for e in runner.events()} == {f"urn:nifi:{u}" for u in originals}


def test_a_damaged_package_is_400_and_keeps_nothing(listening):
    runner = listening()
    status, _, _ = exchange(runner, lambda: request(runner.processor.port, "POST", body=b"NiFiFF3\x00\x01\x00",
                                                    headers={"Content-Type": "application/flowfile-v3"}))
    assert status == 400 and runner.output("success") == []
    status, _, body = request(runner.processor.port, "POST", body=b"x",
                              headers={"Content-Type": "application/flowfile-v2"})
    assert status == 415 and b"older than v3" in body


def test_a_gzipped_body_is_gunzipped(listening):
    runner = listening()
    status, _, _ = exchange(runner, lambda: request(runner.processor.port, "POST", body=gzip.compress(b"z" * 1000),
                                                    headers={"flowfile-gzipped": "true"}))
    assert status == 200 and runner.contents("success") == [b"z" * 1000]
    status, _, _ = exchange(runner, lambda: request(runner.processor.port, "POST", body=gzip.compress(b"y" * 99),
                                                    headers={"Content-Encoding": "gzip"}))
    assert status == 200 and runner.contents("success")[-1] == b"y" * 99


def test_records_in_a_body_are_written_by_the_record_writer(listening):
    import json

    from flowactors.services import CSVReader, JsonRecordSetWriter

    runner = listening({"Record Reader": "reader", "Record Writer": "writer"},
                       services={"reader": (CSVReader, {}), "writer": (JsonRecordSetWriter, {})})
    port = runner.processor.port
    status, _, _ = exchange(runner, lambda: request(port, "POST", body=b"name,age\nada,36\nalan,41\n"))
    assert status == 200
    [flowfile] = runner.output("success")
    assert json.loads(runner.read(flowfile)) == [{"name": "ada", "age": 36}, {"name": "alan", "age": 41}]
    assert flowfile.attributes["record.count"] == "2" and flowfile.attributes["mime.type"] == "application/json"
    status, _, body = exchange(runner, lambda: request(port, "POST", body=b'name,age\n"unclosed,1\n'))
    assert status == 400 and b"records could not be read" in body
    assert len(runner.output("success")) == 1   # nothing of the bad body kept
    assert ListenHTTP.validate_properties({"Listening Port": "0", "Record Reader": "reader"}) == [
        "property 'Record Writer' is required when 'Record Reader' is set"]



def test_a_schema_the_reader_cannot_find_is_500(listening):
    import json

    from flowactors.services import AvroSchemaRegistry, CSVReader, JsonRecordSetWriter

    known = json.dumps({"type": "record", "name": "known", "fields": [{"name": "a", "type": "string"}]})
    runner = listening({"Record Reader": "reader", "Record Writer": "writer"}, services={
        "registry": (AvroSchemaRegistry, {"known": known}),
        "reader": (CSVReader, {"Schema Access Strategy": "Use 'Schema Name' Property", "Schema Registry": "registry",
                               "Schema Name": "${http.schema}"}),
        "writer": (JsonRecordSetWriter, {})})
    status, _, body = exchange(runner, lambda: request(runner.processor.port, "POST", body=b"a\nx\n"))
    assert status == 500 and b"records could not be read" in body and runner.output("success") == []


def test_multipart_is_a_flowfile_per_part_and_too_large_is_413(listening):
    runner = listening({"Multipart Request Max Size": "1 KB"})
    body, content_type = multipart([("note", None, b"one"), ("upload", "a.csv", b"x,y\n1,2\n")])
    status, _, _ = exchange(runner, lambda: request(runner.processor.port, "POST", body=body,
                                                    headers={"Content-Type": content_type}))
    assert status == 200
    first, second = runner.output("success")
    assert (runner.read(first), runner.read(second)) == (b"one", b"x,y\n1,2\n")
    assert first.attributes["http.multipart.name"] == "note" and "http.multipart.filename" not in first.attributes
    assert second.attributes["http.multipart.filename"] == "a.csv"
    assert second.attributes["http.multipart.size"] == "8"
    assert [f.attributes["http.multipart.fragments.sequence.number"] for f in (first, second)] == ["1", "2"]
    assert second.attributes["http.multipart.fragments.total.number"] == "2"
    assert second.attributes["http.headers.multipart.Content-Type"] == "text/plain"
    body, content_type = multipart([("big", None, b"b" * 2000)])
    assert request(runner.processor.port, "POST", body=body, headers={"Content-Type": content_type})[0] == 413


def test_back_pressure_answers_503_until_there_is_room(listening):
    runner = listening()
    success = runner.queues["success"].link.target   # the ConnectionQueue: room for one FlowFile
    success.config = success.config.__class__(**{**success.config.__dict__, "back_pressure_objects": 1})
    port = runner.processor.port
    assert exchange(runner, lambda: request(port, "POST", body=b"one"))[0] == 200
    runner.run(1, stop=False)   # a trigger sees success full
    status, _, body = request(port, "POST", body=b"two")
    assert status == 503 and b"back pressure" in body
    taken, _ = success.poll(10)   # taken downstream: room again
    success.acknowledge([f.uuid for f in taken])
    assert runner.backend.wait_for_space(1.0)   # what the engine's trigger loop waits on before it triggers again
    runner.run(1, stop=False)
    assert exchange(runner, lambda: request(port, "POST", body=b"three"))[0] == 200
    assert runner.contents("success") == [b"three"]


def claim_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and p.stat().st_size]


def test_a_failed_commit_is_500_and_keeps_nothing(listening, tmp_path, monkeypatch):
    runner = listening(content=FileSystemContentRepository(tmp_path / "content"))

    def refuse(batch):
        raise CommitError("refused for the test")

    monkeypatch.setattr(runner.backend, "commit", refuse)
    status, _, _ = exchange(runner, lambda: request(runner.processor.port, "POST", body=b"lost" * 1000))
    assert status == 500
    monkeypatch.undo()
    assert runner.output("success") == [] and runner.events() == []
    assert claim_files(tmp_path / "content") == []   # the session's content was deleted with it


def test_a_large_body_is_streamed_in_bounded_memory(listening, tmp_path):
    runner = listening(content=FileSystemContentRepository(tmp_path / "content"))
    chunk, count = bytes(range(256)) * 1024, 64   # 16 MB, sent chunked
    digest = hashlib.sha256(chunk * count).hexdigest()
    tracemalloc.start()
    try:
        status, _, _ = exchange(runner, lambda: request(runner.processor.port, "POST", body=(chunk for _ in range(count))))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert status == 200
    [flowfile] = runner.output("success")
    assert flowfile.size == len(chunk) * count
    with runner.content.open(flowfile.claim) as stream:
        hashed = hashlib.sha256()
        while block := stream.read(1 << 20):
            hashed.update(block)
    assert hashed.hexdigest() == digest
    assert peak < 6 * 1024 * 1024, f"{peak} bytes at the peak for a {flowfile.size}-byte body"


def test_the_holds_protocol_commits_on_delete(listening):
    # the DELETE is answered 200 whatever Return Code says (NiFi's ContentAcknowledgmentServlet)
    runner = listening({"Max Unconfirmed Flowfile Time": "60 secs", "Return Code": "201"})
    port = runner.processor.port
    status, headers, body = request(port, "POST", body=b"held", headers={"x-prefer-acknowledge-uri": "true"})
    assert status == 303 and headers["x-location-uri-intent"] == "flowfile-hold"
    location = headers["Location"]
    assert location.startswith(f"{BASE}/holds/") and body == location.encode()
    runner.run(1, stop=False)
    assert runner.output("success") == []   # nothing kept until the sender confirms
    assert exchange(runner, lambda: request(port, "DELETE", location))[0] == 200
    assert runner.contents("success") == [b"held"]
    assert request(port, "DELETE", location)[0] == 404
    assert exchange(runner, lambda: request(port, "POST", body=b"not held"))[0] == 201


def test_a_port_in_use_is_one_clear_error_and_stopping_frees_the_port(listening):
    from flowactors.sdk.http_server import ListenError

    runner = listening({"Request Header Maximum Size": "1 KB"})
    port = runner.processor.port
    assert request(port, "POST", body=b"x", headers={"X-Long": "v" * 2000})[0] in (400, 431)
    with pytest.raises(ListenError, match="could not listen: .*[Aa]ddress already in use"):
        listening({"Listening Port": str(port)})
    assert not port_is_free(port)
    runner.processor.on_stopped(runner.context)
    runner.scheduled = False
    assert port_is_free(port)
    again = listening({"Listening Port": str(port)})
    assert again.processor.port == port


# ---------------------------------------------------------------------------------- TLS
@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    from tls_material import make_tls_material

    return make_tls_material(tmp_path_factory.mktemp("tls"))


def test_tls_with_client_authentication_and_the_dn_patterns(listening, tls):
    runner = listening({"SSL Context Service": "ssl", "Authorized Subject DN Pattern": "CN=flowactors test client.*"},
                       services={"ssl": ssl_service(tls)})   # Client Authentication AUTO: a truststore, so REQUIRED
    port = runner.processor.port
    status, _, _ = exchange(runner, lambda: request(port, "POST", body=b"secret", tls=client_tls(tls, tls.client)))
    assert status == 200
    [flowfile] = runner.output("success")
    assert flowfile.attributes["restlistener.remote.user.dn"] == "CN=flowactors test client, O=flowactors tests"
    assert flowfile.attributes["restlistener.remote.issuer.dn"] == "CN=flowactors test CA, O=flowactors tests"
    with pytest.raises((ssl.SSLError, ConnectionError)):   # no certificate: the handshake fails
        request(port, "POST", body=b"anonymous", tls=client_tls(tls))
    other = listening({"SSL Context Service": "ssl", "Authorized Issuer DN Pattern": "CN=someone else.*"},
                      services={"ssl": ssl_service(tls)})
    status, _, body = request(other.processor.port, "POST", body=b"x", tls=client_tls(tls, tls.client))
    assert status == 403 and b"issuer" in body


# ---------------------------------------------------------------------------------- flows
def test_a_nifi_export_loads_with_nifi_1_names_and_runs(tmp_path):
    from flowactors.driver.nifi_export import flow_from_nifi
    from nifi_flows import STANDARD, group, processor, snapshot
    from real_services import free_port

    port = free_port()
    listen = processor("root", "listen", STANDARD + "ListenHTTP", {
        "Base Path": "contentListener", "Listening Port": str(port), "health-check-port": None,
        "Max Data to Receive per Second": "1 MB", "SSL Context Service": None,
        "Authorized DN Pattern": "CN=.*", "authorized-issuer-dn-pattern": ".*",
        "Max Unconfirmed Flowfile Time": "60 secs", "HTTP Headers to receive as Attributes (Regex)": "X-.*",
        "Return Code": "202", "multipart-request-max-size": "1 MB", "multipart-read-buffer-size": "512 KB",
        "client-authentication": "AUTO", "max-thread-pool-size": "200", "record-reader": None,
        "record-writer": None, "Request Header Maximum Size": "8 KB"}, auto_terminate=("success",))
    flow = flow_from_nifi(snapshot(group("root", "listen", None, None, processors=[listen]), {}))
    node = flow.processors["listen"]
    assert node.type is ListenHTTP
    assert node.properties["HTTP Headers for Attributes"] == "X-.*"
    assert node.properties["Authorized Subject DN Pattern"] == "CN=.*"
    assert "Max Data to Receive per Second" not in node.properties
    answers, post = keep_sending(2, lambda i: request(port, "POST", body=f"body {i}".encode())[0])
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60, on_started=post,
                     until=lambda s: len(answers) == 2)
    assert not final.get("timed_out"), final
    assert answers == [202, 202]


def test_a_flow_on_the_in_process_engine_writes_what_was_acknowledged(tmp_path):
    """With two concurrent tasks ListenHTTP's tasks share one server (the second does not fail to
    bind the port) and every request is taken and acknowledged."""
    from real_services import free_port

    port, out = free_port(), tmp_path / "out"
    flow = Flow("listening")
    listen = flow.add(ListenHTTP, "listen", properties={"Listening Port": str(port)}, concurrent_tasks=2)
    put = flow.add(PutFile, "put", properties={"Directory": str(out)}, auto_terminate=["success", "failure"])
    flow.connect(listen, put)
    answers, post_all = keep_sending(20, lambda i: request(port, "POST", body=f"body {i}".encode(),
                                                           headers={"filename": f"f{i}"})[0])
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60, on_started=post_all,
                     until=lambda s: len(answers) == 20 and len(list(out.glob("f*"))) == 20)
    assert not final.get("timed_out"), final
    assert answers == [200] * 20
    assert sorted(p.read_bytes() for p in out.iterdir()) == sorted(f"body {i}".encode() for i in range(20))
    assert port_is_free(port)   # the flow stopped
