"""ConsumeMQTT and PublishMQTT against a real Mosquitto broker (the session's ``mosquitto``
fixture): each QoS, retained messages, demarcated and record batches, the acknowledgement after
the commit (a message a consumer did not commit comes again to the next one), a broker that is
down, and NiFi 1 flows through the NiFi import."""

from __future__ import annotations

import json
import logging
import socket
import time
import uuid
from collections import deque

import pytest

from flowactors.processors import ConsumeMQTT, PublishMQTT
from flowactors.services import JsonRecordSetWriter, JsonTreeReader
from flowactors.testing import ProcessorRunner

JSON_SERVICES = {"reader": (JsonTreeReader, {}), "writer": (JsonRecordSetWriter, {})}


def topic() -> str:
    return f"fa/{uuid.uuid4().hex[:12]}/data"


def consumer(broker, topic_filter: str, **properties) -> ProcessorRunner:
    """A ConsumeMQTT runner, connected and subscribed (its first trigger) before it returns."""
    runner = ProcessorRunner(ConsumeMQTT, {"Broker URI": broker.uri, "Topic Filter": topic_filter, **properties},
                             services=JSON_SERVICES if "Record Reader" in properties else None,
                             auto_terminate=() if "Record Reader" in properties else ("parse.failure",))
    runner.run(1, stop=False)
    assert runner.processor._client is not None and runner.processor._client.connected
    return runner


def publish(broker, topic_name: str, messages: list[tuple[bytes, dict]], **properties) -> ProcessorRunner:
    runner = ProcessorRunner(PublishMQTT, {"Broker URI": broker.uri, "Topic": topic_name, **properties},
                             services=JSON_SERVICES if "Record Reader" in properties else None)
    for content, attributes in messages:
        runner.enqueue(content, attributes)
    runner.run(1)
    return runner


def receive(runner: ProcessorRunner, count: int, relationship: str = "Message", timeout: float = 10.0) -> list:
    """Trigger ``runner`` until ``relationship`` holds ``count`` FlowFiles (or ``timeout`` passed)."""
    deadline = time.monotonic() + timeout
    while len(runner.output(relationship)) < count and time.monotonic() < deadline:
        runner.run(1, stop=False)
        if len(runner.output(relationship)) < count:
            time.sleep(0.02)
    return runner.output(relationship)


def buffered(runner: ProcessorRunner, count: int, timeout: float = 10.0) -> None:
    """Wait until ``runner``'s client holds ``count`` messages it received and no trigger took."""
    deadline = time.monotonic() + timeout
    while len(runner.processor._client._buffer) < count:
        assert time.monotonic() < deadline, "the messages did not arrive"
        time.sleep(0.01)


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_published_messages_arrive_at_each_qos_with_nifi_s_attributes(mosquitto, engine, qos):
    name = topic()
    receiving = consumer(mosquitto, name, **{"Quality of Service": str(qos)})
    sending = publish(mosquitto, "${where}", [(f"reading {n}".encode(), {"where": name}) for n in range(3)],
                      **{"Quality of Service": str(qos)})
    assert len(sending.output("success")) == 3 and sending.output("failure") == []
    assert [e.event_type.value for e in sending.events()] == ["SEND"] * 3
    received = receive(receiving, 3)
    receiving.run(1)   # stops it
    assert [receiving.read(f) for f in received] == [b"reading 0", b"reading 1", b"reading 2"]
    first = received[0].attributes
    assert {k: first[k] for k in ("mqtt.broker", "mqtt.topic", "mqtt.qos", "mqtt.isDuplicate", "mqtt.isRetained",
                                  "mqtt.topic.segment.0", "mqtt.topic.segment.2")} == {
        "mqtt.broker": mosquitto.uri, "mqtt.topic": name, "mqtt.qos": str(qos), "mqtt.isDuplicate": "false",
        "mqtt.isRetained": "false", "mqtt.topic.segment.0": "fa", "mqtt.topic.segment.2": "data"}
    receipts = [e for e in receiving.events() if e.event_type.value == "RECEIVE"]
    assert len(receipts) == 3 and receipts[0].transit_uri == f"{mosquitto.uri}/{name}"


def test_websockets_and_a_shared_subscription_share_the_messages_between_two_consumers(mosquitto):
    """Two consumers of one Group ID over ws:// (the broker's WebSockets listener) each get some
    of the messages, and no message twice."""
    name = topic()
    shared = {"Group ID": "readers", "Quality of Service": "1"}
    first, second = consumer(mosquitto, name, **shared), consumer(mosquitto, name, **shared)
    publish(mosquitto, name, [(f"m{n}".encode(), {}) for n in range(6)],
            **{"Quality of Service": "1", "Broker URI": mosquitto.ws_uri})
    deadline = time.monotonic() + 10
    while len(first.output("Message")) + len(second.output("Message")) < 6 and time.monotonic() < deadline:
        first.run(1, stop=False)
        second.run(1, stop=False)
    first.run(0)
    second.run(0)
    got = [first.read(f) for f in first.output("Message")] + [second.read(f) for f in second.output("Message")]
    assert sorted(got) == [f"m{n}".encode() for n in range(6)]
    assert first.output("Message") and second.output("Message")
    assert first.output("Message")[0].attributes["mqtt.topic"] == name


def test_messages_go_and_come_over_tls_with_the_ssl_context_service(mosquitto):
    """ssl:// with a StandardSSLContextService trusting the broker's CA; a service trusting
    another CA does not connect (the consumer yields, saying the certificate failed)."""
    from flowactors.services import StandardSSLContextService
    from tls_material import PASSWORD

    trusting = {"ssl": (StandardSSLContextService, {"Truststore Filename": str(mosquitto.tls.truststore_p12),
                                                    "Truststore Password": PASSWORD, "Truststore Type": "PKCS12"})}
    tls = {"Broker URI": mosquitto.tls_uri, "SSL Context Service": "ssl", "Quality of Service": "1"}
    name = topic()
    receiving = ProcessorRunner(ConsumeMQTT, {**tls, "Topic Filter": name}, services=trusting)
    receiving.run(1, stop=False)
    assert receiving.processor._client is not None
    sending = ProcessorRunner(PublishMQTT, {**tls, "Topic": name}, services=trusting)
    sending.enqueue(b"secret")
    sending.run(1)
    assert len(sending.output("success")) == 1
    [message] = receive(receiving, 1)
    receiving.run(0)
    assert receiving.read(message) == b"secret" and message.attributes["mqtt.broker"] == mosquitto.tls_uri
    stranger = ProcessorRunner(ConsumeMQTT, {**tls, "Topic Filter": name}, services={"ssl": (
        StandardSSLContextService, {"Truststore Filename": str(mosquitto.tls.stranger.cert), "Truststore Type": "PEM"})})
    stranger.run(1)
    assert stranger.context.take_yield_request() and stranger.processor._client is None


def test_a_retained_message_reaches_a_consumer_that_subscribes_later(mosquitto):
    name = topic()
    publish(mosquitto, name, [(b"last known", {"keep": "true"})],
            **{"Retain Message": "${keep}", "Quality of Service": "1"})
    receiving = consumer(mosquitto, name, **{"Quality of Service": "1"})
    [message] = receive(receiving, 1)
    receiving.run(1)
    assert receiving.read(message) == b"last known" and message.attributes["mqtt.isRetained"] == "true"
    publish(mosquitto, name, [(b"", {})], **{"Retain Message": "true"})   # clears the retained message


def test_demarcated_messages_go_out_and_come_back_many_a_flowfile(mosquitto):
    name = topic()
    receiving = consumer(mosquitto, name, **{"Message Demarcator": "\n", "Quality of Service": "1"})
    publish(mosquitto, name, [(b"a\nb\n\nc\n", {})], **{"Message Demarcator": "\n", "Quality of Service": "1"})
    buffered(receiving, 3)
    [batch] = receive(receiving, 1)
    receiving.run(1)
    assert receiving.read(batch) == b"a\nb\nc" and batch.attributes["mqtt.broker"] == mosquitto.uri


def test_a_flowfile_that_failed_part_way_goes_on_after_the_messages_that_went(mosquitto):
    """The failed-index attribute a partial failure leaves (here set by hand) makes the next
    attempt skip the messages the broker has; success removes it."""
    name = topic()
    receiving = consumer(mosquitto, name, **{"Quality of Service": "1"})
    sending = publish(mosquitto, name, [(b"a\nb\nc", {"PublishMQTT.mqtt.publish.failed.index": "1"})],
                      **{"Message Demarcator": "\n", "Quality of Service": "1"})
    [sent] = sending.output("success")
    assert "PublishMQTT.mqtt.publish.failed.index" not in sent.attributes
    assert [e.details for e in sending.events() if e.event_type.value == "SEND"] == ["3 message(s)"]
    buffered(receiving, 2)
    received = receive(receiving, 2)
    receiving.run(0)
    assert [receiving.read(f) for f in received] == [b"b", b"c"]


def test_records_go_out_one_a_message_and_come_back_as_records_with_the_message_fields(mosquitto):
    name = topic()
    receiving = consumer(mosquitto, name, **{"Record Reader": "reader", "Record Writer": "writer",
                                             "Quality of Service": "1"})
    records = [{"id": 1, "v": "x"}, {"id": 2, "v": "y"}]
    sent = publish(mosquitto, name, [(json.dumps(records).encode(), {})],
                   **{"Record Reader": "reader", "Record Writer": "writer", "Quality of Service": "1"})
    assert len(sent.output("success")) == 1
    publish(mosquitto, name, [(b"{not json", {})], **{"Quality of Service": "1"})
    buffered(receiving, 3)
    [written] = receive(receiving, 1)
    [unreadable] = receiving.output("parse.failure")
    receiving.run(1)
    rows = json.loads(receiving.read(written))
    assert [(r["id"], r["v"], r["_topic"], r["_topicSegments"], r["_qos"], r["_isRetained"]) for r in rows] == [
        (1, "x", name, name.split("/"), 1, False), (2, "y", name, name.split("/"), 1, False)]
    assert written.attributes["record.count"] == "2"
    assert receiving.read(unreadable) == b"{not json" and unreadable.attributes["mqtt.topic"] == name


def test_records_without_the_message_fields_and_a_batch_of_only_unreadable_messages(mosquitto):
    """NiFi's testConsumeRecordsWithoutAddedFields and testConsumeRecordsOnlyBadData: with Add
    Attributes as Fields false the records are written as they came; a trigger whose messages
    are all unreadable writes no Message FlowFile, only parse.failure."""
    name = topic()
    receiving = consumer(mosquitto, name, **{"Record Reader": "reader", "Record Writer": "writer",
                                             "Add Attributes as Fields": "false", "Quality of Service": "1"})
    for content in (b'{"name": "Apache NiFi"}', b"THIS IS NOT JSON", b'{"name": "Apache NiFi"}'):
        publish(mosquitto, name, [(content, {})], **{"Quality of Service": "1"})
    buffered(receiving, 3)
    [written] = receive(receiving, 1)
    assert json.loads(receiving.read(written)) == [{"name": "Apache NiFi"}] * 2
    publish(mosquitto, name, [(b"THIS IS NOT JSON EITHER", {})], **{"Quality of Service": "2"})
    buffered(receiving, 1)
    unreadable = receive(receiving, 2, "parse.failure")
    receiving.run(1)
    assert [receiving.read(f) for f in unreadable] == [b"THIS IS NOT JSON", b"THIS IS NOT JSON EITHER"]
    assert len(receiving.output("Message")) == 1


def test_a_message_whose_records_do_not_fit_the_others_goes_to_parse_failure_alone(mosquitto):
    """Records whose schema cannot be merged with the earlier messages' (``id`` a number, then
    text) cannot go into the same FlowFile: that message goes to ``parse.failure`` as it came,
    as a record NiFi's writer refuses does, and the rest are written out and acknowledged (before,
    every trigger failed on the batch and put it back, so nothing ever left the buffer)."""
    name = topic()
    receiving = consumer(mosquitto, name, **{"Record Reader": "reader", "Record Writer": "writer",
                                             "Quality of Service": "1"})
    for content in (b'[{"id": 1}]', b'[{"id": "one"}]', b'[{"id": 2}]'):
        publish(mosquitto, name, [(content, {})], **{"Quality of Service": "1"})
    buffered(receiving, 3)
    [written] = receive(receiving, 1)
    [misfit] = receiving.output("parse.failure")
    assert receiving.processor._client._buffer == deque()
    receiving.run(1)
    assert [r["id"] for r in json.loads(receiving.read(written))] == [1, 2]
    assert receiving.read(misfit) == b'[{"id": "one"}]'
    assert "the Record Writer cannot write the message's records with the others'" in \
        misfit.attributes["flowactors.failure.reason"]


def test_a_full_buffer_drops_qos_0_messages_and_holds_qos_1_messages_back(mosquitto, caplog):
    """Max Queue Size 2, four messages each: at QoS 0 two are dropped with a warning; at QoS 1
    the other two wait in the network thread and arrive once a trigger made room."""
    for qos, expected in (("0", [b"m0", b"m1"]), ("1", [b"m0", b"m1", b"m2", b"m3"])):
        name = topic()
        receiving = consumer(mosquitto, name, **{"Quality of Service": qos, "Max Queue Size": "2"})
        publish(mosquitto, name, [(f"m{n}".encode(), {}) for n in range(4)], **{"Quality of Service": qos})
        buffered(receiving, 2)
        time.sleep(0.3)   # time for the other two to arrive, or be dropped
        got = receive(receiving, 4, timeout=1.0 if qos == "0" else 10.0)
        receiving.run(0)
        assert [receiving.read(f) for f in got] == expected
    assert caplog.text.count("Max Queue Size (2) reached: a QoS 0 message on") == 2


def _vanish(runner: ProcessorRunner) -> None:
    """What a killed process does to its connection: it ends without DISCONNECT or any ack."""
    client = runner.processor._client._client
    client.socket().shutdown(socket.SHUT_RDWR)   # as the kernel closes a dead process's socket
    client.loop_stop()


@pytest.mark.parametrize("version", ["4", "5"])
def test_a_message_not_committed_is_sent_again_to_the_next_consumer_of_the_session(mosquitto, version):
    """Resume Session, QoS 1, MQTT 3.1.1 and 5: the first consumer holds the message but never
    commits it (its process vanishes); the broker sends it again to the next consumer with the
    same Client ID, marked duplicate. Once that one committed, a third gets nothing."""
    name, client_id = topic(), f"fa-{uuid.uuid4().hex[:8]}"
    session = {"Quality of Service": "1", "Session State": "false", "Client ID": client_id,
               "MQTT Specification Version": version}
    first = consumer(mosquitto, name, **session)
    publish(mosquitto, name, [(b"important", {})], **{"Quality of Service": "1"})
    buffered(first, 1)
    _vanish(first)
    second = ProcessorRunner(ConsumeMQTT, {"Broker URI": mosquitto.uri, "Topic Filter": name, **session})
    [again] = receive(second, 1)
    second.run(1)   # committed, acknowledged, disconnected
    assert second.read(again) == b"important" and again.attributes["mqtt.isDuplicate"] == "true"
    third = ProcessorRunner(ConsumeMQTT, {"Broker URI": mosquitto.uri, "Topic Filter": name, **session})
    third.run(3, stop=False)
    time.sleep(0.2)
    third.run(1)
    assert third.output("Message") == []


def test_messages_of_a_trigger_that_failed_are_kept_unacknowledged_for_the_next(mosquitto, caplog):
    """On the stateless engine a trigger's commit counts only once the whole flow's trigger
    succeeded; when it fails instead, the messages it took go back, first in line, and the next
    trigger writes them out again."""
    from flowactors.engine.errors import TriggerFailed

    name = topic()
    runner = ProcessorRunner(ConsumeMQTT, {"Broker URI": mosquitto.uri, "Topic Filter": name,
                                           "Quality of Service": "1"}, engine="stateless")
    runner.run(1, stop=False)
    publish(mosquitto, name, [(b"again", {})], **{"Quality of Service": "1"})
    buffered(runner, 1)
    runner.processor.on_trigger(runner.context, runner.new_session())
    runner.backend.log.fail(TriggerFailed("a later processor failed", "exception"))
    assert [m.payload for m in runner.processor._client._buffer] == [b"again"]
    assert "the session holding 1 MQTT messages was not committed" in caplog.text
    dropped = len(runner.output("Message"))   # the failed trigger's output (the runner's queue keeps it)
    written = receive(runner, dropped + 1)
    runner.run(0)
    assert len(written) == dropped + 1 and runner.read(written[-1]) == b"again"
    assert runner.processor._client is None


def test_a_reconnection_the_broker_refused_is_made_again_by_the_next_trigger(mosquitto, caplog):
    """paho reconnects by itself after a lost connection, but stops when the broker refuses (a
    login no longer accepted, a server not ready); the next trigger says so and connects anew,
    rather than keeping a client that will never receive anything again."""
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.reasoncodes import ReasonCode

    name = topic()
    receiving = consumer(mosquitto, name, **{"Quality of Service": "1"})
    refused = receiving.processor._client
    refused._on_connect(refused._client, None, None, ReasonCode(PacketTypes.CONNACK, "Not authorized"), None)
    receiving.run(1, stop=False)
    assert receiving.processor._client is not refused and receiving.processor._client.connected
    assert "the broker refused the connection: Not authorized; connecting again" in caplog.text
    publish(mosquitto, name, [(b"after", {})], **{"Quality of Service": "1"})
    [message] = receive(receiving, 1)
    receiving.run(0)
    assert receiving.read(message) == b"after"


def test_the_broker_publishes_the_last_will_of_a_client_that_vanished(mosquitto):
    name = topic()
    watcher = consumer(mosquitto, f"{name}/status")
    doomed = consumer(mosquitto, name, **{"Last Will Message": "gone", "Last Will Topic": f"{name}/status",
                                          "Last Will QoS Level": "1"})
    _vanish(doomed)
    [will] = receive(watcher, 1)
    watcher.run(0)
    assert watcher.read(will) == b"gone" and will.attributes["mqtt.topic"] == f"{name}/status"


def test_a_broker_that_is_down_gives_one_sentence_and_a_yield_and_loses_nothing(caplog):
    from real_services import free_port

    uri = f"tcp://127.0.0.1:{free_port()}"
    caplog.set_level(logging.ERROR, logger="flowactors.processors.messaging.mqtt")
    receiving = ProcessorRunner(ConsumeMQTT, {"Broker URI": uri, "Topic Filter": "x", "Connection Timeout": "2"})
    receiving.run(1)
    assert receiving.context.take_yield_request() and receiving.output("Message") == []
    sending = ProcessorRunner(PublishMQTT, {"Broker URI": uri, "Topic": "x", "Connection Timeout": "2"})
    sending.enqueue(b"kept")
    sending.run(1)
    assert sending.context.take_yield_request() and sending.input_count == 1
    assert sending.output("failure") == [] and sending.output("success") == []
    [consume_error, publish_error] = [r.getMessage() for r in caplog.records]
    assert consume_error == (f"ConsumeMQTT: cannot connect to the MQTT broker ({uri}: [Errno 111] Connection "
                             "refused); yielding")
    assert publish_error.startswith("PublishMQTT: cannot connect to the MQTT broker (") and \
        publish_error.endswith("the FlowFiles stay queued; yielding")


def test_broker_uris_are_tried_in_order(mosquitto):
    """The second URI answers; ``mqtt.broker`` names both as NiFi does (comma-separated, without
    the property's spaces), and the transit URI brackets them (NiFi's form for several)."""
    from real_services import free_port

    name, uris = topic(), f"tcp://127.0.0.1:{free_port()}, {mosquitto.uri}"
    receiving = consumer(mosquitto, name, **{"Broker URI": uris, "Quality of Service": "1"})
    publish(mosquitto, name, [(b"second broker", {})], **{"Broker URI": uris, "Quality of Service": "1"})
    [message] = receive(receiving, 1)
    receiving.run(0)
    listed = uris.replace(", ", ",")
    assert receiving.read(message) == b"second broker" and message.attributes["mqtt.broker"] == listed
    [receipt] = [e for e in receiving.events() if e.event_type.value == "RECEIVE"]
    assert receipt.transit_uri == f"[{listed}]/{name}"


def test_a_flowfile_whose_qos_or_topic_is_unusable_goes_to_failure_saying_why(mosquitto):
    sending = publish(mosquitto, "${t}", [(b"a", {"t": "x", "q": "7"}), (b"b", {"q": "1"}),
                                          (b"c", {"t": "plant/#", "q": "1"})], **{"Quality of Service": "${q}"})
    reasons = sorted(f.attributes["flowactors.failure.reason"] for f in sending.output("failure"))
    assert reasons == ["Quality of Service evaluates to '7', not 0, 1 or 2", "Topic evaluates to nothing",
                       "not published to 'plant/#': Publish topic cannot contain wildcards."]


def test_a_flowfile_whose_records_cannot_be_read_goes_to_failure_and_publishes_nothing(mosquitto):
    name = topic()
    receiving = consumer(mosquitto, name, **{"Quality of Service": "1"})
    sending = publish(mosquitto, name, [(b'[{"id": 1}, {not json', {})],
                      **{"Record Reader": "reader", "Record Writer": "writer", "Quality of Service": "1"})
    [failed] = sending.output("failure")
    assert failed.attributes["flowactors.failure.reason"].startswith(f"not published to {name!r}: ")
    assert failed.attributes["PublishMQTT.mqtt.publish.failed.index"] == "0"
    time.sleep(0.2)
    receiving.run(1)
    assert receiving.output("Message") == []


def test_configurations_nifi_refuses_are_refused():
    with pytest.raises(ValueError, match="supported: tcp, ssl, ws, wss"):
        ProcessorRunner(ConsumeMQTT, {"Broker URI": "http://h:1", "Topic Filter": "x"})
    with pytest.raises(ValueError, match="needs the SSL Context Service"):
        ProcessorRunner(PublishMQTT, {"Broker URI": "ssl://h:8883", "Topic": "x"})
    with pytest.raises(ValueError, match="set both or neither"):
        ProcessorRunner(ConsumeMQTT, {"Broker URI": "tcp://h:1", "Topic Filter": "x", "Username": "u"})
    with pytest.raises(ValueError, match="cannot be used together"):
        ProcessorRunner(ConsumeMQTT, {"Broker URI": "tcp://h:1", "Topic Filter": "x", "Message Demarcator": ",",
                                      "Record Reader": "reader", "Record Writer": "writer"}, services=JSON_SERVICES)


def test_a_nifi_1_flow_publishes_and_consumes_through_the_import(mosquitto, tmp_path):
    """GenerateFlowFile -> PublishMQTT and ConsumeMQTT -> UpdateAttribute, with NiFi 1's property
    names (Quality of Service(QoS), Session state, Keep Alive Interval (seconds) ...): the message
    is retained, so the consumer receives it whichever starts first."""
    from flowactors import run_flow
    from flowactors.driver.nifi_export import flow_from_nifi
    from nifi_flows import STANDARD, connection, group, processor, snapshot

    name, root = topic(), "root"
    common = {"Broker URI": mosquitto.uri, "MQTT Specification Version": "0", "Username": None, "Password": None,
              "SSL Context Service": None, "Session state": "true", "Client ID": None,
              "Connection Timeout (seconds)": "30", "Keep Alive Interval (seconds)": "60",
              "Last Will Message": None, "Last Will Topic": None, "Last Will Retain": None,
              "Last Will QoS Level": None, "record-reader": None, "record-writer": None, "message-demarcator": None}
    generate = processor(root, "make", STANDARD + "GenerateFlowFile", {"Custom Text": "from nifi 1",
                                                                      "Max FlowFiles": "1"}, schedule="10 min")
    send = processor(root, "send", "org.apache.nifi.processors.mqtt.PublishMQTT", {
        **common, "Topic": name, "Retain Message": "true", "Quality of Service(QoS)": "1"},
        auto_terminate=("success", "failure"))
    take = processor(root, "take", "org.apache.nifi.processors.mqtt.ConsumeMQTT", {
        **common, "Group ID": None, "Topic Filter": name, "Quality of Service(QoS)": "1",
        "add-attributes-as-fields": "true", "Max Queue Size": "100"}, auto_terminate=("parse.failure",))
    end = processor(root, "end", "org.apache.nifi.processors.attributes.UpdateAttribute", {"seen": "yes"},
                    auto_terminate=("success",))
    flow = flow_from_nifi(snapshot(group(root, "mqtt", None, None, processors=[generate, send, take, end],
                                         connections=[connection(root, generate, send, ("success",)),
                                                      connection(root, take, end, ("Message",))]), {}))
    assert flow.processors["take"].properties["Quality of Service"] == "1"
    assert flow.processors["send"].properties["Keep Alive"] == "60"
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=30,
                     until=lambda s: sum(p["flowfiles_in"] for p in s["processors"] if p["name"] == "end") == 1)
    assert not final.get("timed_out"), final
    publish(mosquitto, name, [(b"", {})], **{"Retain Message": "true"})


def test_importing_the_processors_does_not_import_the_broker_clients():
    """paho and pika are imported where first used: a flow without MQTT or AMQP does not pay
    for them (together 50 to 70 ms at ``import flowactors.processors``)."""
    import subprocess
    import sys

    code = ("import sys, flowactors.processors; "
            "assert not [m for m in sys.modules if m.split('.')[0] in ('paho', 'pika')], 'a broker client was imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
