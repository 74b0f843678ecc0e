"""ConsumeAMQP and PublishAMQP against a real RabbitMQ (the session's ``rabbitmq`` fixture): the
message properties and headers both ways, the acknowledgement after the commit (a message a
consumer did not commit goes to the next one; with Auto-Acknowledge it is gone), publisher
confirms, a broker that is down or a queue that does not exist, and NiFi 1 flows through the
NiFi import."""

from __future__ import annotations

import json
import logging
import time
import uuid

import pika
import pytest

from flowactors.processors import ConsumeAMQP, PublishAMQP
from flowactors.testing import ProcessorRunner


def login(broker) -> dict[str, str]:
    return {"Host Name": "127.0.0.1", "Port": str(broker.port), "Username": broker.user, "Password": broker.password}


def new_queue(broker) -> str:
    """A fresh durable queue on the broker's default vhost."""
    name = f"fa-{uuid.uuid4().hex[:10]}"
    with _connection(broker) as connection:
        connection.channel().queue_declare(name, durable=True)
    return name


def _connection(broker) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", broker.port, credentials=pika.PlainCredentials(broker.user, broker.password)))


def waiting(broker, queue: str) -> int:
    """Messages ready in ``queue`` (not delivered to a consumer)."""
    with _connection(broker) as connection:
        return connection.channel().queue_declare(queue, passive=True).method.message_count


def publish(broker, messages: list[tuple[bytes, dict]], **properties) -> ProcessorRunner:
    runner = ProcessorRunner(PublishAMQP, {**login(broker), **properties})
    for content, attributes in messages:
        runner.enqueue(content, attributes)
    runner.run(1)
    return runner


def consume(runner: ProcessorRunner, count: int, timeout: float = 10.0) -> list:
    """Trigger ``runner`` (without stopping it) until ``success`` holds ``count`` FlowFiles."""
    deadline = time.monotonic() + timeout
    while len(runner.output("success")) < count and time.monotonic() < deadline:
        runner.run(1, stop=False)
        if len(runner.output("success")) < count:
            time.sleep(0.02)
    return runner.output("success")


def test_a_message_s_properties_and_headers_go_out_from_attributes_and_come_back_as_them(rabbitmq, engine):
    queue = new_queue(rabbitmq)
    sent = publish(rabbitmq, [(b"order 1", {"amqp$contentType": "text/plain", "amqp$appId": "shop",
                                            "amqp$priority": "5", "amqp$type": "order", "amqp$timestamp": "1700000000000",
                                            "amqp$headers": "region=eu, rush"}),
                              (b"order 2", {"amqp$priority": "high"})],   # not a number: sent without it
                   **{"Routing Key": queue})
    assert len(sent.output("success")) == 2
    assert [e.transit_uri for e in sent.events()][0] == f"amqp://127.0.0.1:{rabbitmq.port}//E:/RK:{queue}"
    receiving = ProcessorRunner(ConsumeAMQP, {**login(rabbitmq), "Queue": queue})
    first, second = consume(receiving, 2)
    receiving.run(1)
    assert receiving.read(first) == b"order 1" and receiving.read(second) == b"order 2"
    assert {k: v for k, v in first.attributes.items() if k.startswith("amqp$")} == {
        "amqp$contentType": "text/plain", "amqp$appId": "shop", "amqp$priority": "5", "amqp$type": "order",
        "amqp$timestamp": "1700000000000", "amqp$headers": "{region=eu,rush}", "amqp$routingKey": queue,
        "amqp$exchange": ""}
    assert "amqp$priority" not in second.attributes
    assert waiting(rabbitmq, queue) == 0
    receipts = [e for e in receiving.events() if e.event_type.value == "RECEIVE"]
    assert receipts[0].transit_uri == f"amqp://127.0.0.1:{rabbitmq.port}//{queue}"


def test_brokers_are_tried_in_order(rabbitmq):
    from real_services import free_port

    queue = new_queue(rabbitmq)
    brokers = {"Brokers": f"127.0.0.1:{free_port()},127.0.0.1:{rabbitmq.port}", "Host Name": "ignored.invalid"}
    sent = publish(rabbitmq, [(b"via the second", {})], **{**brokers, "Routing Key": queue})
    assert len(sent.output("success")) == 1 and waiting(rabbitmq, queue) == 1


def test_headers_from_matching_attributes_as_json_and_as_attributes(rabbitmq):
    queue = new_queue(rabbitmq)
    publish(rabbitmq, [(b"x", {"trace.id": "7", "trace.span": "a", "other": "no"})] * 2,
            **{"Routing Key": queue, "Headers Source": "FLOWFILE_ATTRIBUTES", "Headers Pattern": r"trace\..*"})
    as_json = ProcessorRunner(ConsumeAMQP, {**login(rabbitmq), "Queue": queue, "Batch Size": "1",
                                            "Header Output Format": "JSON String"})
    [one] = consume(as_json, 1)
    as_json.run(0)   # stops it
    assert json.loads(one.attributes["amqp$headers"]) == {"trace.id": "7", "trace.span": "a"}
    as_attributes = ProcessorRunner(ConsumeAMQP, {**login(rabbitmq), "Queue": queue,
                                                  "Header Output Format": "FlowFile Attributes",
                                                  "Header Key Prefix": "in"})
    [two] = consume(as_attributes, 1)
    as_attributes.run(0)
    assert (two.attributes["in.trace.id"], two.attributes["in.trace.span"]) == ("7", "a")
    assert "amqp$headers" not in two.attributes and "in.other" not in two.attributes


def test_a_message_not_committed_goes_to_the_next_consumer_and_with_auto_acknowledge_is_gone(rabbitmq):
    """The first consumer holds the message (delivered, in its client) when its connection ends
    without a commit, as at a kill: the broker gives it to the next consumer. With
    Auto-Acknowledge Messages the broker counted it delivered when it sent it: it is gone."""
    for auto_ack, expected in (("false", [b"keep me"]), ("true", [])):
        queue = new_queue(rabbitmq)
        first = ProcessorRunner(ConsumeAMQP, {**login(rabbitmq), "Queue": queue,
                                              "Auto-Acknowledge Messages": auto_ack})
        first.run(1, stop=False)   # connects and starts consuming
        publish(rabbitmq, [(b"keep me", {})], **{"Routing Key": queue})
        link = first.processor._link
        deadline = time.monotonic() + 10
        while not first.processor._waiting and time.monotonic() < deadline:
            link.connection.process_data_events(0.05)
        assert first.processor._waiting, "the message did not reach the first consumer"
        link.connection.close()   # no commit, no acknowledgement
        second = ProcessorRunner(ConsumeAMQP, {**login(rabbitmq), "Queue": queue})
        got = consume(second, 1, timeout=1.0 if expected == [] else 10.0)
        second.run(1)
        assert [second.read(f) for f in got] == expected
        assert waiting(rabbitmq, queue) == 0


def test_messages_of_a_trigger_that_failed_go_back_to_the_queue(rabbitmq, caplog):
    """On the stateless engine a trigger's commit counts only once the whole flow's trigger
    succeeded; when it fails instead, its messages are given back (basic_nack, requeue) and
    delivered again."""
    from flowactors.engine.errors import TriggerFailed

    queue = new_queue(rabbitmq)
    runner = ProcessorRunner(ConsumeAMQP, {**login(rabbitmq), "Queue": queue}, engine="stateless")
    runner.run(1, stop=False)
    publish(rabbitmq, [(b"again", {})], **{"Routing Key": queue})
    deadline = time.monotonic() + 10
    while not runner.processor._waiting and time.monotonic() < deadline:
        runner.processor._link.connection.process_data_events(0.05)
    runner.processor.on_trigger(runner.context, runner.new_session())
    runner.backend.log.fail(TriggerFailed("a later processor failed", "exception"))
    assert "the session holding 1 messages was not committed" in caplog.text
    dropped = len(runner.output("success"))   # the failed trigger's output (the runner's queue keeps it)
    written = consume(runner, dropped + 1)
    runner.run(0)
    assert len(written) == dropped + 1 and runner.read(written[-1]) == b"again"
    assert waiting(rabbitmq, queue) == 0   # acknowledged after the trigger that succeeded


def test_connections_the_broker_closed_are_made_again_without_losing_a_flowfile(rabbitmq):
    """The broker closes every connection (as a restart or missed heartbeats do) while both
    processors are idle: their next triggers connect again; the publisher's FlowFile goes out,
    and the message the consumer held unacknowledged is delivered again."""
    queue = new_queue(rabbitmq)
    sending = ProcessorRunner(PublishAMQP, {**login(rabbitmq), "Routing Key": queue})
    sending.enqueue(b"one")
    sending.run(1, stop=False)
    receiving = ProcessorRunner(ConsumeAMQP, {**login(rabbitmq), "Queue": queue, "Prefetch Count": "5"})
    receiving.run(1, stop=False)
    link = receiving.processor._link
    deadline = time.monotonic() + 10
    while not receiving.processor._waiting and time.monotonic() < deadline:
        link.connection.process_data_events(0.05)
    publishing = sending.processor._link
    rabbitmq.close_connections()
    sending.enqueue(b"two")
    sending.run(1, stop=False)
    assert sending.processor._link is not publishing   # a new connection
    sending.run(0)
    assert sending.contents("success") == [b"one", b"two"] and sending.output("failure") == []
    got = consume(receiving, 2)
    assert receiving.processor._link is not link
    receiving.run(0)
    assert sorted(receiving.read(f) for f in got) == [b"one", b"two"]
    assert waiting(rabbitmq, queue) == 0


def test_messages_go_and_come_over_tls_with_the_ssl_context_service(rabbitmq):
    from flowactors.services import StandardSSLContextService
    from tls_material import PASSWORD

    queue = new_queue(rabbitmq)
    trusting = {"ssl": (StandardSSLContextService, {"Truststore Filename": str(rabbitmq.tls.truststore_p12),
                                                    "Truststore Password": PASSWORD, "Truststore Type": "PKCS12"})}
    tls = {**login(rabbitmq), "Port": str(rabbitmq.tls_port), "SSL Context Service": "ssl"}
    sending = ProcessorRunner(PublishAMQP, {**tls, "Routing Key": queue}, services=trusting)
    sending.enqueue(b"secret")
    sending.run(1)
    assert len(sending.output("success")) == 1
    receiving = ProcessorRunner(ConsumeAMQP, {**tls, "Queue": queue}, services=trusting)
    [message] = consume(receiving, 1)
    receiving.run(0)
    assert receiving.read(message) == b"secret" and waiting(rabbitmq, queue) == 0


def test_publisher_confirms_send_an_unroutable_message_to_failure(rabbitmq):
    nowhere = f"nobody-{uuid.uuid4().hex[:6]}"
    confirmed = publish(rabbitmq, [(b"lost?", {})], **{"Routing Key": nowhere, "Delivery Guarantee": "AT_LEAST_ONCE"})
    [failed] = confirmed.output("failure")
    assert failed.attributes["flowactors.failure.reason"] == (
        f"the broker could not route it to any queue (exchange '', routing key '{nowhere}')")
    unconfirmed = publish(rabbitmq, [(b"lost", {})], **{"Routing Key": nowhere})
    assert len(unconfirmed.output("success")) == 1   # NiFi's At most once: sent, not known to arrive
    queue = new_queue(rabbitmq)
    assert len(publish(rabbitmq, [(b"kept", {})], **{"Routing Key": queue,
                                                     "Delivery Guarantee": "AT_LEAST_ONCE"}).output("success")) == 1
    assert waiting(rabbitmq, queue) == 1


def test_a_missing_exchange_sends_the_flowfile_to_failure_and_the_next_trigger_connects_again(rabbitmq):
    """With publisher confirms the broker's closing of the channel is the publish's answer."""
    queue, nowhere = new_queue(rabbitmq), f"nope-{uuid.uuid4().hex[:6]}"
    runner = ProcessorRunner(PublishAMQP, {**login(rabbitmq), "Exchange Name": "${ex}", "Routing Key": queue,
                                           "Delivery Guarantee": "AT_LEAST_ONCE"})
    runner.enqueue(b"first", {"ex": nowhere})
    runner.enqueue(b"second", {"ex": ""})
    runner.run(1, stop=False)
    [failed] = runner.output("failure")
    assert failed.attributes["flowactors.failure.reason"] == (
        f"publishing through amqp://127.0.0.1:{rabbitmq.port}/ failed (the connection is made again): "
        f"NOT_FOUND - no exchange '{nowhere}' in vhost '/' (404)")
    assert runner.context.take_yield_request() and runner.input_count == 1
    runner.run(1)
    assert runner.contents("success") == [b"second"] and waiting(rabbitmq, queue) == 1


def test_a_flowfile_published_on_a_connection_that_broke_goes_back_to_the_queue(rabbitmq, caplog):
    """A connection (or a channel) that broke before the publish, as at a broker restart in the
    middle of a trigger, or the channel the broker closed for an earlier FlowFile's missing
    exchange (AT_MOST_ONCE learns of it only then): not the FlowFile's fault, so it goes back to
    the queue (NiFi rolls the session back) rather than to failure, and goes out on the next
    connection. (Called directly: the trigger checks the link first and would connect again.)"""
    queue = new_queue(rabbitmq)
    runner = ProcessorRunner(PublishAMQP, {**login(rabbitmq), "Routing Key": queue})
    runner.enqueue(b"kept")
    link = runner.processor._connected(runner.context)
    link.connection.close()
    session = runner.new_session()
    assert not runner.processor._publish(runner.context, session, link, session.get())
    runner.processor._drop()   # as the trigger does when _publish says the connection broke
    session.commit()
    assert runner.output("failure") == [] and runner.input_count == 1
    assert "the FlowFile goes back to the queue and the connection is made again" in caplog.text
    runner.run(1)
    assert runner.contents("success") == [b"kept"] and waiting(rabbitmq, queue) == 1


def test_a_flowfile_over_the_maximum_size_or_without_a_routing_key_goes_to_failure(rabbitmq):
    sent = publish(rabbitmq, [(b"x" * 20, {"rk": "q"}), (b"y", {})],
                   **{"Routing Key": "${rk}", "Maximum Input FlowFile Size": "10 B"})
    reasons = sorted(f.attributes["flowactors.failure.reason"] for f in sent.output("failure"))
    assert reasons == ["Routing Key evaluates to nothing", "the FlowFile has 20 bytes, more than the Maximum Input "
                                                           "FlowFile Size (10 bytes)"]


def test_a_broker_that_is_down_or_a_missing_queue_gives_one_sentence_and_a_yield(rabbitmq, caplog):
    from real_services import free_port

    caplog.set_level(logging.ERROR, logger="flowactors.processors.messaging.amqp")
    port = free_port()
    down = {**login(rabbitmq), "Port": str(port)}
    receiving = ProcessorRunner(ConsumeAMQP, {**down, "Queue": "q"})
    receiving.run(1)
    assert receiving.context.take_yield_request()
    sending = ProcessorRunner(PublishAMQP, {**down, "Routing Key": "q"})
    sending.enqueue(b"kept")
    sending.run(1)
    assert sending.context.take_yield_request() and sending.input_count == 1 and sending.output("failure") == []
    missing = f"missing-{uuid.uuid4().hex[:6]}"
    nowhere = ProcessorRunner(ConsumeAMQP, {**login(rabbitmq), "Queue": missing})
    nowhere.run(1)
    assert nowhere.context.take_yield_request()
    refused, kept, absent = [r.getMessage() for r in caplog.records if r.name.startswith("flowactors")]
    assert refused == (f"ConsumeAMQP: cannot connect to the AMQP broker at 127.0.0.1:{port} (virtual host '/'): "
                       "[Errno 111] Connection refused; yielding")
    assert kept == refused.replace("ConsumeAMQP", "PublishAMQP")
    assert absent == (f"ConsumeAMQP: cannot consume from the queue '{missing}' at amqp://127.0.0.1:{rabbitmq.port}/: "
                      f"NOT_FOUND - no queue '{missing}' in vhost '/' (404); yielding")


@pytest.mark.parametrize("text, expected", [
    ("foo=(bar,bar)|foo2=bar2|foo3|foo4=malformed=|foo5=mal=formed||=ignored",
     {"foo": "(bar,bar)", "foo2": "bar2", "foo3": None}),
    ("foo=bar|=missing|   |foo2| foo3 = ", {"foo": "bar", "foo2": None, "foo3": ""})])
def test_an_amqp_headers_text_is_read_as_nifi_reads_it(text, expected):
    """NiFi's PublishAMQPTest validateMalformedHeaderIgnoredAndPublishToSuccess and
    validateEmptyHeaderKeysIgnoredAndPublishToSuccess, their texts and expected headers."""
    from flowactors.processors.messaging.amqp import headers_from_text

    assert headers_from_text(text, "|") == expected


def test_login_settings_nifi_refuses_are_refused():
    with pytest.raises(ValueError, match="set Username and Password"):
        ProcessorRunner(ConsumeAMQP, {"Queue": "q"})
    with pytest.raises(ValueError, match="needs an SSL Context Service"):
        ProcessorRunner(PublishAMQP, {"Routing Key": "q", "Client Certificate Authentication Enabled": "true"})
    with pytest.raises(ValueError, match="'rabbit' is not host:port"):
        ProcessorRunner(ConsumeAMQP, {"Queue": "q", "Username": "u", "Password": "p", "Brokers": "a:5672, rabbit"})
    with pytest.raises(ValueError, match="needs a Headers Pattern"):
        ProcessorRunner(PublishAMQP, {"Routing Key": "q", "Username": "u", "Password": "p",
                                      "Headers Source": "FLOWFILE_ATTRIBUTES"})


def test_a_nifi_1_flow_publishes_and_consumes_through_the_import(rabbitmq, tmp_path):
    """GenerateFlowFile -> PublishAMQP and ConsumeAMQP -> RouteOnAttribute with NiFi 1's property
    names (User Name, header.separator, auto.acknowledge, batch.size, ssl-client-auth ...): the
    headers go out split on '|' and come back joined with ';', without braces."""
    from flowactors import run_flow
    from flowactors.driver.nifi_export import flow_from_nifi
    from nifi_flows import STANDARD, connection, group, processor, snapshot

    queue, root = new_queue(rabbitmq), "root"
    common = {"Brokers": None, "Host Name": "127.0.0.1", "Port": str(rabbitmq.port), "Virtual Host": None,
              "User Name": rabbitmq.user, "Password": rabbitmq.password, "AMQP Version": "0.9.1",
              "ssl-context-service": None, "ssl-client-auth": "NONE", "cert-authentication": "false"}
    generate = processor(root, "make", STANDARD + "GenerateFlowFile", {
        "Custom Text": "from nifi 1", "Max FlowFiles": "1", "amqp$headers": "a=1|b=2"}, schedule="10 min")
    send = processor(root, "send", "org.apache.nifi.amqp.processors.PublishAMQP", {
        **common, "Exchange Name": "", "Routing Key": queue, "header.separator": "|"},
        auto_terminate=("success", "failure"))
    take = processor(root, "take", "org.apache.nifi.amqp.processors.ConsumeAMQP", {
        **common, "Queue": queue, "auto.acknowledge": "false", "batch.size": "10", "prefetch.count": "0",
        "header.format": "Comma-Separated String", "header.separator": ";", "remove.curly.braces": "True"})
    check = processor(root, "check", STANDARD + "RouteOnAttribute", {
        "Routing Strategy": "Route to Property name", "as sent": "${'amqp$headers':equals('a=1;b=2')}"},
        auto_terminate=("unmatched",))
    end = processor(root, "end", "org.apache.nifi.processors.attributes.UpdateAttribute", {"seen": "yes"},
                    auto_terminate=("success",))
    flow = flow_from_nifi(snapshot(group(root, "amqp", None, None, processors=[generate, send, take, check, end],
                                         connections=[connection(root, generate, send, ("success",)),
                                                      connection(root, take, check, ("success",)),
                                                      connection(root, check, end, ("as sent",))]), {}))
    assert flow.processors["take"].properties["Auto-Acknowledge Messages"] == "false"
    assert flow.processors["send"].properties["Header Separator"] == "|"
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=30,
                     until=lambda s: sum(p["flowfiles_in"] for p in s["processors"] if p["name"] == "end") == 1)
    assert not final.get("timed_out"), final
    assert waiting(rabbitmq, queue) == 0
