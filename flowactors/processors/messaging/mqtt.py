"""ConsumeMQTT and PublishMQTT: NiFi 2's MQTT processors on paho-mqtt 2 (docs/messaging.md).

**Delivery.** NiFi's ConsumeMQTT acknowledges a message when it arrives and keeps it in memory
until a trigger writes it out, so a kill loses what it held. Here the client acknowledges by hand
(paho's ``manual_ack``): a QoS 1 or 2 message is acknowledged only once the session that wrote it
is durable (``session.commit_async(on_success=...)``). With Session State ``false`` (Resume
Session) and a fixed Client ID, the broker keeps what was not acknowledged and sends it again when
the client comes back, so QoS 1 is at-least-once across a stop, a lost connection or a kill. QoS
2's receiver confirms receipt (PUBREC) on arrival, as the protocol has it, and only its completion
(PUBCOMP) waits for the commit: after PUBREC the broker never sends the message again, so a kill
in between loses it, as in NiFi. QoS 0 is at most once. With Clean Session the broker forgets the
session at every disconnect, messages not yet committed with it.

``MqttClient`` wraps one paho client: it connects to the first of the Broker URIs that answers,
subscribes (a consumer) again at each connection, and buffers what arrives, at most Max Queue Size
messages (a QoS 1 or 2 message waits in the network thread for room; a QoS 0 one is dropped, with
a warning). A message is acknowledged only on the connection that received it: after a reconnect
the broker's session sends it again (a duplicate, never a loss).
"""

from __future__ import annotations

import io
import itertools
import logging
import ssl
import threading
import uuid
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Sequence
from urllib.parse import SplitResult, urlsplit

import pyarrow as pa

from flowactors.processors._common import boolean_property, route_failure
from flowactors.processors.records._io import is_flowfile_error, open_records, reader_and_writer, write_records
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.records import RecordReaderFactory, RecordSetWriterFactory
from flowactors.sdk.relationships import FAILURE, reason
from flowactors.sdk.services import SSLContextService

if TYPE_CHECKING:   # paho is imported where first used, so that ``import flowactors.processors`` does not pay for it
    import paho.mqtt.client as paho

log = logging.getLogger(__name__)

SCHEMES = ("tcp", "ssl", "ws", "wss")
#: the protocol levels of MQTT 3.1, 3.1.1 and 5 (paho's MQTTv31, MQTTv311, MQTTv5)
MQTT_V31, MQTT_V311, MQTT_V5 = 3, 4, 5
#: MQTT Specification Version's values (NiFi's): v3 AUTO, v5.0, v3.1.1, v3.1.0
VERSIONS = {"0": MQTT_V311, "5": MQTT_V5, "4": MQTT_V311, "3": MQTT_V31}
QOS = ("0", "1", "2")
#: messages one demarcated or record FlowFile holds at most (NiFi's)
MAX_MESSAGES_PER_FLOWFILE = 10_000


class MqttUnavailable(Exception):
    """No broker of the Broker URI could be connected to (one sentence: which, and why)."""


class PublishIncomplete(RuntimeError):
    """Not every message went: ``published`` counts those before the first that did not (the broker
    has them); a later attempt may start after them."""

    def __init__(self, message: str, published: int):
        super().__init__(message)
        self.published = published


def broker_uris(text: str) -> list[SplitResult]:
    """The Broker URI property's comma-separated URIs; ValueError names what is wrong."""
    uris = [urlsplit(part.strip()) for part in text.split(",") if part.strip()]
    if not uris:
        raise ValueError("names no broker (e.g. tcp://localhost:1883)")
    for uri in uris:
        if uri.scheme.lower() not in SCHEMES:
            raise ValueError(f"{uri.geturl()!r} has the scheme {uri.scheme!r}; supported: {', '.join(SCHEMES)}")
        if not uri.hostname:
            raise ValueError(f"{uri.geturl()!r} names no host")
        uri.port  # raises ValueError for a port that is not a number
    if len({uri.scheme.lower() for uri in uris}) > 1:
        raise ValueError("all URIs must use the same scheme")
    return uris


def _uri_problem(value: str) -> str | None:
    try:
        broker_uris(value)
    except ValueError as err:
        return str(err)
    return None


BROKER_URI = PropertyDescriptor(
    "Broker URI", "The broker(s), comma-separated (tcp://host:1883, ssl://, ws://, wss://): on a failed connection "
    "the next is tried", required=True, validator=_uri_problem)
MQTT_VERSION = PropertyDescriptor(
    "MQTT Specification Version", "0 (v3 AUTO: 3.1.1 here), 5 (v5.0), 4 (v3.1.1) or 3 (v3.1.0)", required=True,
    default="0", allowable_values=tuple(VERSIONS))
USERNAME = PropertyDescriptor("Username", "The user to connect as (with Password)")
PASSWORD = PropertyDescriptor("Password", "The user's password", sensitive=True)
SSL_CONTEXT = PropertyDescriptor("SSL Context Service", "TLS settings, for ssl:// and wss:// brokers",
                                 service=SSLContextService)
SESSION_STATE = PropertyDescriptor(
    "Session State", "true: Clean Session (the broker forgets the session at each disconnect); false: Resume "
    "Session (the broker keeps subscriptions and unacknowledged messages for the Client ID)", required=True,
    default="true", allowable_values=("true", "false"))
SESSION_EXPIRY = PropertyDescriptor(
    "Session Expiry Interval", "MQTT 5 with Resume Session: how long the broker keeps the session after a "
    "disconnect", default="24 hrs", validator=validators.DURATION)
CLIENT_ID = PropertyDescriptor("Client ID", "The client identifier (a random UUID when unset; Resume Session "
                               "needs a fixed one)")
CONNECTION_TIMEOUT = PropertyDescriptor(
    "Connection Timeout", "Seconds to wait for a connection (and, publishing, for an acknowledgement); 0: no limit",
    default="30", validator=validators.NON_NEGATIVE_INTEGER)
KEEP_ALIVE = PropertyDescriptor("Keep Alive", "Seconds between the client's pings when nothing else travels",
                                default="60", validator=validators.NON_NEGATIVE_INTEGER)
LAST_WILL_MESSAGE = PropertyDescriptor("Last Will Message", "What the broker publishes if the client vanishes")
LAST_WILL_TOPIC = PropertyDescriptor("Last Will Topic", "Where the Last Will Message goes (required with it)")
LAST_WILL_RETAIN = boolean_property("Last Will Retain", False, "Whether the Last Will Message is retained")
LAST_WILL_QOS = PropertyDescriptor("Last Will QoS Level", "The Last Will Message's QoS", required=True,
                                   default="0", allowable_values=QOS)
RECORD_READER = PropertyDescriptor("Record Reader", "Reads the records of each message (with Record Writer)",
                                   service=RecordReaderFactory)
RECORD_WRITER = PropertyDescriptor("Record Writer", "Writes the records out (with Record Reader)",
                                   service=RecordSetWriterFactory)
MESSAGE_DEMARCATOR = PropertyDescriptor(
    "Message Demarcator", "Text (UTF-8) between messages: many messages a FlowFile", expression_language=True)

COMMON = (BROKER_URI, MQTT_VERSION, USERNAME, PASSWORD, SSL_CONTEXT, SESSION_STATE, SESSION_EXPIRY, CLIENT_ID)
LAST_WILL = (CONNECTION_TIMEOUT, KEEP_ALIVE, LAST_WILL_MESSAGE, LAST_WILL_TOPIC, LAST_WILL_RETAIN, LAST_WILL_QOS)
#: NiFi 1's names of the properties both processors have (AbstractMQTTProcessor.migrateProperties)
NIFI_COMMON_NAMES = {"record-reader": "Record Reader", "record-writer": "Record Writer",
                     "message-demarcator": "Message Demarcator",
                     "Connection Timeout (seconds)": "Connection Timeout",
                     "Keep Alive Interval (seconds)": "Keep Alive", "Session state": "Session State",
                     "Quality of Service(QoS)": "Quality of Service"}


def common_problems(values: dict[str, str]) -> list[str]:
    """The checks both processors make over their whole configuration (NiFi's customValidate)."""
    problems = []
    if ("Username" in values) != ("Password" in values):
        problems.append("Username and Password: set both or neither")
    uri = values.get("Broker URI", "")
    if uri.strip().lower().startswith(("ssl:", "wss:")) and "SSL Context Service" not in values:
        problems.append("an ssl:// or wss:// Broker URI needs the SSL Context Service")
    if ("Record Reader" in values) != ("Record Writer" in values):
        problems.append("Record Reader and Record Writer: set both or neither")
    if "Record Reader" in values and "Message Demarcator" in values:
        problems.append("Message Demarcator and Record Reader/Writer cannot be used together")
    if "Last Will Message" in values and not values.get("Last Will Topic", "").strip():
        problems.append("Last Will Topic is required with a Last Will Message")
    return problems


@dataclass(frozen=True)
class Received:
    """One message as it arrived, and the connection (``generation``) it came on."""

    topic: str
    payload: bytes
    qos: int
    duplicate: bool
    retained: bool
    mid: int
    generation: int


@dataclass(frozen=True)
class ClientSettings:
    """What connecting takes, read from a processor's properties (``client_settings``)."""

    uris: tuple[SplitResult, ...]
    client_id: str
    version: int
    clean: bool
    expiry: float
    keep_alive: int
    timeout: float | None
    username: str | None
    password: str | None
    tls: ssl.SSLContext | None
    will: tuple[str, bytes, int, bool] | None

    @property
    def raw_uris(self) -> str:
        """The Broker URIs as NiFi writes them (``mqtt.broker``, PublishMQTT's SEND): comma-separated."""
        return ",".join(uri.geturl() for uri in self.uris)

    def transit_uri(self, topic: str) -> str:
        """NiFi's RECEIVE transit URI of ``topic``: the Broker URIs, bracketed when there are several."""
        return f"{self.raw_uris if len(self.uris) == 1 else f'[{self.raw_uris}]'}/{topic}"


def client_settings(context: ProcessContext) -> ClientSettings:
    prop = context.property
    will = None
    if prop("Last Will Message").is_set:
        will = (prop("Last Will Topic").evaluate() or "", (prop("Last Will Message").evaluate() or "").encode(),
                int(prop("Last Will QoS Level").evaluate() or 0), prop("Last Will Retain").as_bool())
    tls = context.service("SSL Context Service", SSLContextService).create_context() \
        if prop("SSL Context Service").is_set else None
    timeout = int(prop("Connection Timeout").evaluate() or 0)
    return ClientSettings(
        uris=tuple(broker_uris(prop("Broker URI").evaluate() or "")), client_id=prop("Client ID").evaluate() or str(uuid.uuid4()),
        version=VERSIONS[prop("MQTT Specification Version").evaluate() or "0"],
        clean=prop("Session State").as_bool(), expiry=prop("Session Expiry Interval").as_duration() or 0,
        keep_alive=int(prop("Keep Alive").evaluate() or 0), timeout=timeout or None,
        username=prop("Username").evaluate(), password=prop("Password").evaluate(), tls=tls, will=will)


class MqttClient:
    """One paho client connected to a broker of ``settings`` (``connect``), its network loop in a
    thread of its own. With ``subscription`` (topic filter, QoS) it subscribes at every connection
    and buffers what arrives, at most ``max_queue`` messages (the module docstring); ``take``,
    ``put_back`` and ``ack`` are what a trigger does with them."""

    def __init__(self, settings: ClientSettings, subscription: tuple[str, int] | None = None, max_queue: int = 1000):
        self.settings = settings
        self.subscription = subscription
        self.max_queue = max_queue
        self.generation = 0
        self._buffer: deque[Received] = deque()
        self._room = threading.Condition()
        self._closing = False
        self._connected = threading.Event()
        self._subscribed = threading.Event()
        self._refusal: str | None = None
        self._client: paho.Client | None = None

    # ------------------------------------------------------------------ connecting
    def connect(self) -> None:
        """Connect to the first broker that accepts (and subscribe); MqttUnavailable otherwise."""
        problems = []
        for uri in self.settings.uris:
            try:
                self._open(uri)
                return
            except (OSError, MqttUnavailable, ValueError) as err:
                problems.append(f"{uri.geturl()}: {reason(err)}")
        raise MqttUnavailable(f"cannot connect to the MQTT broker ({'; '.join(problems)})")

    def _new_client(self, uri: SplitResult) -> paho.Client:
        import paho.mqtt.client as paho
        from paho.mqtt.enums import CallbackAPIVersion

        settings = self.settings
        websockets = uri.scheme.lower() in ("ws", "wss")
        v5 = settings.version == MQTT_V5
        client = paho.Client(CallbackAPIVersion.VERSION2, client_id=settings.client_id, protocol=settings.version,
                             clean_session=None if v5 else settings.clean, manual_ack=True,
                             transport="websockets" if websockets else "tcp")
        if websockets:
            client.ws_set_options(path=uri.path or "/mqtt")
        if uri.scheme.lower() in ("ssl", "wss"):
            if settings.tls is None:
                raise ValueError("an ssl:// or wss:// broker needs the SSL Context Service")
            client.tls_set_context(settings.tls)
        if settings.username is not None:
            client.username_pw_set(settings.username, settings.password)
        if settings.will is not None:
            client.will_set(*settings.will)
        if settings.timeout:
            client.connect_timeout = settings.timeout
        client.on_connect = self._on_connect
        client.on_subscribe = self._on_subscribe
        client.on_message = self._on_message
        return client

    def _open(self, uri: SplitResult) -> None:
        import paho.mqtt.client as paho
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        settings = self.settings
        client = self._new_client(uri)
        self._connected.clear()
        self._subscribed.clear()
        self._refusal = None
        properties = None
        if settings.version == MQTT_V5:
            properties = Properties(PacketTypes.CONNECT)
            properties.SessionExpiryInterval = 0 if settings.clean else int(settings.expiry)
            if self.subscription is not None:   # the broker sends no more unacknowledged messages than fit
                properties.ReceiveMaximum = max(1, min(self.max_queue, 65535))
        default_port = 443 if uri.scheme.lower() == "wss" else 80 if uri.scheme.lower() == "ws" else \
            8883 if uri.scheme.lower() == "ssl" else 1883
        client.connect(uri.hostname, uri.port or default_port, settings.keep_alive,
                       clean_start=settings.clean if settings.version == MQTT_V5 else paho.MQTT_CLEAN_START_FIRST_ONLY,
                       properties=properties)
        client.loop_start()
        wait = settings.timeout or None
        ready = self._connected.wait(wait) and (self.subscription is None or self._subscribed.wait(wait))
        if not ready or self._refusal is not None:
            client.loop_stop()
            client.disconnect()
            raise MqttUnavailable(self._refusal or f"no answer in {settings.timeout} s")
        self._client = client

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            self._refusal = f"the broker refused the connection: {reason_code}"
            self._connected.set()
            self._subscribed.set()
            client.disconnect()   # no automatic retries with a refused login
            return
        with self._room:
            self.generation += 1
        if self.subscription is not None:
            client.subscribe(*self.subscription)
        self._connected.set()

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:
        refused = [code for code in reason_codes if code.is_failure]
        if refused:
            self._refusal = f"the broker refused the subscription to {self.subscription[0]!r}: {refused[0]}"
        self._subscribed.set()

    @property
    def connected(self) -> bool:
        return self._client is not None and self._client.is_connected()

    @property
    def refused(self) -> str | None:
        """Why the broker refused a connection or the subscription since ``connect`` succeeded
        (paho then stops reconnecting), else None."""
        return self._refusal

    def close(self) -> None:
        """Disconnect and end the network thread; what was buffered and not acknowledged is left to
        the broker's session."""
        with self._room:
            self._closing = True
            self._room.notify_all()
        if self._client is not None:
            self._client.disconnect()
            self._client.loop_stop()
            self._client = None

    # ------------------------------------------------------------------ consuming
    def _on_message(self, client, userdata, message) -> None:
        try:
            topic = message.topic
        except UnicodeDecodeError:
            log.warning("MQTT: a message whose topic is not UTF-8 was ignored (%r)", message._topic)
            return
        with self._room:
            received = Received(topic, message.payload or b"", message.qos, bool(message.dup), bool(message.retain),
                                message.mid, self.generation)
            while len(self._buffer) >= self.max_queue and not self._closing:
                if message.qos == 0:
                    log.warning("MQTT: Max Queue Size (%d) reached: a QoS 0 message on %r was dropped",
                                self.max_queue, topic)
                    return
                self._room.wait(0.5)
            if not self._closing:
                self._buffer.append(received)

    def take(self, limit: int) -> list[Received]:
        """Up to ``limit`` buffered messages, oldest first."""
        with self._room:
            taken = [self._buffer.popleft() for _ in range(min(limit, len(self._buffer)))]
            self._room.notify_all()
        return taken

    def put_back(self, messages: Sequence[Received]) -> None:
        """Messages ``take`` gave that were not committed: first in line again."""
        with self._room:
            self._buffer.extendleft(reversed(messages))

    def ack(self, messages: Sequence[Received]) -> None:
        """Acknowledge the QoS 1 and 2 messages received on the connection there is now."""
        client = self._client
        for message in messages:
            if message.qos and client is not None and message.generation == self.generation:
                client.ack(message.mid, message.qos)

    # ------------------------------------------------------------------ publishing
    def publish(self, topic: str, payloads: Iterator[bytes], qos: int, retain: bool) -> int:
        """Publish each payload and wait until the broker has them (QoS 1, 2) or they were written
        (QoS 0); returns how many went. ``PublishIncomplete`` says why one did not, and how many
        before it went; ValueError is paho's refusal of a topic or a payload."""
        import paho.mqtt.client as paho
        from paho.mqtt.enums import MQTTErrorCode

        client = self._client
        if client is None:
            raise PublishIncomplete("not connected to the MQTT broker", 0)
        pending, refusal = [], None
        for payload in payloads:
            info = client.publish(topic, payload, qos, retain)
            if info.rc not in (MQTTErrorCode.MQTT_ERR_SUCCESS, MQTTErrorCode.MQTT_ERR_NO_CONN):
                refusal = f"message {len(pending) + 1} was not published: {paho.error_string(info.rc)}"
                break
            pending.append(info)
        timeout = self.settings.timeout or None
        for count, info in enumerate(pending):
            try:
                info.wait_for_publish(timeout)
            except (RuntimeError, ValueError) as err:
                raise PublishIncomplete(f"message {count + 1} was not published: {err}", count) from None
            if not info.is_published():
                raise PublishIncomplete(f"the broker did not take message {count + 1} of {len(pending)} in {timeout} "
                                        "s (connection lost?)", count)
        if refusal is not None:
            raise PublishIncomplete(refusal, len(pending))
        return len(pending)


class _Mqtt(Processor):
    """What both processors share: their client, made at the first trigger, and made again when
    the broker refused a reconnection (paho stops trying then); a broker that cannot be reached
    makes the trigger log why and yield."""

    #: what the error says becomes of the processor's work while the broker cannot be reached
    MEANWHILE = ""

    def __init__(self) -> None:
        self._client: MqttClient | None = None

    def custom_validate(self, values) -> list[str]:
        return common_problems(values)

    def _new_client(self, context: ProcessContext) -> MqttClient:
        raise NotImplementedError

    def _connected(self, context: ProcessContext) -> MqttClient | None:
        """The client, connected (and subscribed), connecting now if need be; None after logging
        why it cannot connect and yielding."""
        if self._client is not None:
            if self._client.refused is None:
                return self._client   # paho's loop reconnects by itself after a lost connection
            log.error("%s: %s; connecting again", context.name, self._client.refused)
            self.on_stopped(context)
        client = self._new_client(context)
        try:
            client.connect()
        except MqttUnavailable as err:
            log.error("%s: %s; %syielding", context.name, err, self.MEANWHILE)
            context.yield_()
            return None
        self._client = client
        return client

    def on_stopped(self, context: ProcessContext) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


# ---------------------------------------------------------------------------------- ConsumeMQTT
TOPIC_FIELDS = ("_topic", "_topicSegments", "_qos", "_isDuplicate", "_isRetained")


def message_attributes(broker: str, message: Received) -> dict[str, str]:
    """The attributes NiFi's ConsumeMQTT writes for one message."""
    attributes = {"mqtt.broker": broker, "mqtt.topic": message.topic, "mqtt.qos": str(message.qos),
                  "mqtt.isDuplicate": str(message.duplicate).lower(), "mqtt.isRetained": str(message.retained).lower()}
    if message.topic:
        attributes.update({f"mqtt.topic.segment.{i}": part for i, part in enumerate(message.topic.split("/"))})
    return attributes


def read_message_records(reader: RecordReaderFactory, message: Received, add_fields: bool) -> pa.Table:
    """One message's records (with the message's fields when ``add_fields``)."""
    records = reader.create_reader({}, io.BytesIO(message.payload), len(message.payload))
    table = pa.Table.from_batches(list(records.batches()), schema=records.schema())
    if add_fields:
        rows = table.num_rows
        segments = message.topic.split("/") if message.topic else None
        for name, value, kind in zip(TOPIC_FIELDS, (message.topic, segments, message.qos, message.duplicate,
                                                     message.retained),
                                     (pa.string(), pa.list_(pa.string()), pa.int32(), pa.bool_(), pa.bool_())):
            if name in table.schema.names:
                table = table.drop_columns([name])
            table = table.append_column(pa.field(name, kind), pa.array([value] * rows, type=kind))
    return table


class ConsumeMQTT(_Mqtt):
    """Subscribes to Topic Filter and makes FlowFiles of the messages (to ``Message``): one a
    message (with NiFi's attributes), or many in one, separated by Message Demarcator, or their
    records in one written by Record Writer (a message the reader cannot read goes to
    ``parse.failure`` alone). A message is acknowledged once its FlowFile is durable (the module
    docstring). A broker that cannot be reached: an error saying which and why, and the processor
    yields. Provenance: RECEIVE, transit URI ``<Broker URI>/<topic>``."""

    description = "Receives messages from an MQTT broker"
    input_required = False
    NIFI_TYPE = "org.apache.nifi.processors.mqtt.ConsumeMQTT"
    NIFI_PROPERTY_NAMES = {**NIFI_COMMON_NAMES, "add-attributes-as-fields": "Add Attributes as Fields"}
    MESSAGE = Relationship("Message", "The messages received")
    PARSE_FAILURE = Relationship("parse.failure", "Each message the Record Reader could not read, as it came")
    relationships = (MESSAGE, PARSE_FAILURE)
    properties = (*COMMON, PropertyDescriptor("Group ID", "A shared subscription's group ($share/<group>/<filter>)"),
                  PropertyDescriptor("Topic Filter", "The topics to subscribe to (MQTT wildcards + and #)",
                                     required=True, validator=validators.NON_EMPTY),
                  PropertyDescriptor("Quality of Service", "The QoS to subscribe with", required=True, default="0",
                                     allowable_values=QOS),
                  RECORD_READER, RECORD_WRITER,
                  boolean_property("Add Attributes as Fields", True, "Records mode: add the fields _topic, "
                                   "_topicSegments, _qos, _isDuplicate and _isRetained to each record"),
                  MESSAGE_DEMARCATOR, *LAST_WILL,
                  PropertyDescriptor("Max Queue Size", "Messages held in memory between triggers at most",
                                     required=True, default="1000", validator=validators.POSITIVE_INTEGER))

    def custom_validate(self, values) -> list[str]:
        problems = super().custom_validate(values)
        if "Group ID" in values and "Client ID" in values and "${" not in values["Client ID"]:
            problems.append("Client ID and Group ID: a fixed Client ID cannot join a consumer group from several "
                            "tasks or nodes (use an expression, e.g. ${hostname()}, or leave it unset)")
        return problems

    def on_trigger(self, context: ProcessContext, session) -> None:
        client = self._connected(context)
        if client is None:
            return
        records = context.property("Record Reader").is_set
        demarcated = context.property("Message Demarcator").is_set
        messages = client.take(MAX_MESSAGES_PER_FLOWFILE if records or demarcated else context.batch_size)
        if not messages:
            context.yield_()
            return
        try:
            if records:
                self._emit_records(context, session, client, messages)
            elif demarcated:
                self._emit_demarcated(context, session, client, messages)
            else:
                self._emit_each(session, client.settings, messages)
        except BaseException:
            client.put_back(messages)
            raise

        def failed(err: BaseException) -> None:
            client.put_back(messages)
            log.error("%s: the session holding %d MQTT messages was not committed (%s); they are kept, "
                      "unacknowledged, for the next trigger", context.name, len(messages), reason(err))

        session.commit_async(on_success=lambda: client.ack(messages), on_failure=failed)

    def _new_client(self, context: ProcessContext) -> MqttClient:
        group = context.property("Group ID").evaluate()
        topic = context.property("Topic Filter").evaluate() or ""
        return MqttClient(client_settings(context), (f"$share/{group}/{topic}" if group else topic,
                                                     int(context.property("Quality of Service").evaluate() or 0)),
                          int(context.property("Max Queue Size").evaluate() or 1000))

    def _emit_each(self, session, settings: ClientSettings, messages: list[Received]) -> None:
        flowfiles = session.create_batch(len(messages))
        flowfiles = session.write_bytes_batch(flowfiles, [m.payload for m in messages])
        flowfiles = [session.put_all_attributes(f, message_attributes(settings.raw_uris, m))
                     for f, m in zip(flowfiles, messages)]
        for flowfile, message in zip(flowfiles, messages):
            session.provenance.receive(flowfile, settings.transit_uri(message.topic))
        session.transfer_batch(flowfiles, self.MESSAGE.name)

    def _emit_demarcated(self, context: ProcessContext, session, client: MqttClient, messages: list[Received]) -> None:
        demarcator = (context.property("Message Demarcator").evaluate() or "").encode()
        flowfile = session.write_bytes(session.create(), demarcator.join(m.payload for m in messages))
        flowfile = session.put_attribute(flowfile, "mqtt.broker", client.settings.raw_uris)
        session.provenance.receive(flowfile, client.settings.transit_uri(client.subscription[0]))
        session.transfer(flowfile, self.MESSAGE)

    def _emit_records(self, context: ProcessContext, session, client: MqttClient, messages: list[Received]) -> None:
        reader, writer = reader_and_writer(context)
        add_fields = context.property("Add Attributes as Fields").as_bool()
        tables, schema = [], None
        for message in messages:
            try:
                records = read_message_records(reader, message, add_fields)
            except Exception as err:
                if not (is_flowfile_error(err) or isinstance(err, (pa.ArrowException, ValueError))):
                    raise
                self._parse_failure(context, session, client.settings, message,
                                    f"the Record Reader cannot read the message: {reason(err)}")
                continue
            try:   # the schema all messages' records are written with, so far
                merged = records.schema if schema is None else pa.unify_schemas([schema, records.schema],
                                                                                  promote_options="permissive")
            except pa.ArrowException as err:   # NiFi's writer refuses such a record: parse.failure too
                self._parse_failure(context, session, client.settings, message, "the Record Writer cannot write the "
                                    f"message's records with the others' (one FlowFile, one schema): {reason(err)}")
                continue
            tables.append(records)
            schema = merged
        table = pa.concat_tables(tables, promote_options="permissive") if tables else None
        if table is None or table.num_rows == 0:
            return
        flowfile = session.put_attribute(session.create(), "mqtt.broker", client.settings.raw_uris)
        schema = writer.write_schema(flowfile.attributes, table.schema)
        flowfile, _ = write_records(session, flowfile, writer, schema, table.to_batches())
        session.provenance.receive(flowfile, client.settings.transit_uri(client.subscription[0]))
        session.transfer(flowfile, self.MESSAGE)

    def _parse_failure(self, context: ProcessContext, session, settings: ClientSettings, message: Received,
                       why: str) -> None:
        """``message`` alone, as it came, to ``parse.failure``, saying ``why``."""
        failed = session.write_bytes(session.create(), message.payload)
        failed = session.put_all_attributes(failed, message_attributes(settings.raw_uris, message))
        session.provenance.receive(failed, settings.transit_uri(message.topic))
        route_failure(context, session, failed, why, relationship=self.PARSE_FAILURE)


# ---------------------------------------------------------------------------------- PublishMQTT
def demarcated(content: bytes, demarcator: bytes) -> Iterator[bytes]:
    """The non-empty parts of ``content`` between ``demarcator``s."""
    return (part for part in content.split(demarcator) if part)


class PublishMQTT(_Mqtt):
    """Publishes each FlowFile's content to Topic as one message, or as one message a part between
    Message Demarcators, or one a record (written by Record Writer), waiting until the broker has
    each (QoS 1, 2). Success: the FlowFile to ``success`` (Provenance: SEND, transit URI the Broker
    URI). A FlowFile whose Topic, QoS or Retain Message evaluates to nothing usable, or whose
    messages the broker did not take, goes to ``failure`` with the reason; after a partial
    failure, ``<processor name>.mqtt.publish.failed.index`` counts what went, and the next attempt
    skips that many (records and demarcated parts alike). A broker that cannot be reached: the
    FlowFiles stay queued, an error says why, and the processor yields."""

    description = "Publishes messages to an MQTT broker"
    NIFI_TYPE = "org.apache.nifi.processors.mqtt.PublishMQTT"
    NIFI_PROPERTY_NAMES = NIFI_COMMON_NAMES
    SUCCESS = Relationship("success", "FlowFiles whose messages the broker took")
    relationships = (SUCCESS, Relationship(FAILURE.name, "FlowFiles that could not be published (the reason in "
                                                         "flowactors.failure.reason)"))
    properties = (*COMMON,
                  PropertyDescriptor("Topic", "The topic to publish to", required=True, expression_language=True,
                                     validator=validators.NON_EMPTY),
                  PropertyDescriptor("Retain Message", "Whether the broker retains the message (true / false)",
                                     required=True, default="false", expression_language=True,
                                     validator=validators.BOOLEAN),
                  PropertyDescriptor("Quality of Service", "0, 1 or 2", required=True, default="0",
                                     expression_language=True, validator=lambda v: None if v in QOS else "must be 0, 1 or 2"),
                  RECORD_READER, RECORD_WRITER, MESSAGE_DEMARCATOR, *LAST_WILL)

    MEANWHILE = "the FlowFiles stay queued; "

    def _new_client(self, context: ProcessContext) -> MqttClient:
        return MqttClient(client_settings(context))

    def on_trigger(self, context: ProcessContext, session) -> None:
        if self._connected(context) is None:
            return
        for flowfile in session.get_batch():
            self._publish(context, session, flowfile)

    def _publish(self, context: ProcessContext, session, flowfile) -> None:
        topic = context.property("Topic").evaluate(flowfile) or ""
        qos = (context.property("Quality of Service").evaluate(flowfile) or "").strip()
        retain = (context.property("Retain Message").evaluate(flowfile) or "").strip().lower()
        problem = ("Topic evaluates to nothing" if not topic.strip() else
                   f"Quality of Service evaluates to {qos!r}, not 0, 1 or 2" if qos not in QOS else
                   f"Retain Message evaluates to {retain!r}, not true or false" if retain not in ("true", "false")
                   else None)
        if problem is not None:
            route_failure(context, session, flowfile, problem)
            return
        index_attribute = f"{context.name}.mqtt.publish.failed.index"
        done_before = int(flowfile.attributes.get(index_attribute, "0") or 0)
        try:
            payloads = itertools.islice(self._payloads(context, session, flowfile), done_before, None)
            sent = self._client.publish(topic, payloads, int(qos), retain == "true")
        except Exception as err:   # RuntimeError: not taken; ValueError: a topic or payload MQTT refuses
            if not (isinstance(err, (RuntimeError, ValueError)) or is_flowfile_error(err)):
                raise
            went = err.published if isinstance(err, PublishIncomplete) else 0
            route_failure(context, session, flowfile, f"not published to {topic!r}: {reason(err)}",
                          {index_attribute: str(done_before + went)})
            return
        if index_attribute in flowfile.attributes:
            flowfile = session.remove_attribute(flowfile, index_attribute)
        session.provenance.send(flowfile, self._client.settings.raw_uris, f"{done_before + sent} message(s)")
        session.transfer(flowfile, self.SUCCESS)

    @staticmethod
    def _payloads(context: ProcessContext, session, flowfile) -> Iterator[bytes]:
        """The messages of one FlowFile: its content, its demarcated parts, or one a record."""
        if context.property("Message Demarcator").is_set:
            return demarcated(session.read_bytes(flowfile),
                              (context.property("Message Demarcator").evaluate(flowfile) or "").encode())
        if not context.property("Record Reader").is_set:
            return iter([session.read_bytes(flowfile)])
        reader, writer = reader_and_writer(context)
        messages = []
        with open_records(session, flowfile, reader) as records:
            schema = writer.write_schema(flowfile.attributes, records.schema)
            for batch in records:
                for row in range(batch.num_rows):
                    out = io.BytesIO()
                    record_writer = writer.create_writer(schema, out, flowfile.attributes)
                    record_writer.write_batch(batch.slice(row, 1))
                    record_writer.finish()
                    messages.append(out.getvalue())
        return iter(messages)
