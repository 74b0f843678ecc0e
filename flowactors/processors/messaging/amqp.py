"""ConsumeAMQP and PublishAMQP: NiFi 2's AMQP 0-9-1 processors on pika (docs/messaging.md).

pika is the AMQP 0-9-1 client RabbitMQ's own documentation uses: maintained, pure Python (no
system library), with publisher confirms and the blocking API a trigger needs. Each processor
task keeps one ``BlockingConnection`` and channel, used only by the thread that triggers it; an
acknowledgement asked for from another thread (a commit's callback) is handed to that thread
(``add_callback_threadsafe``) and sent at its next trigger or stop.

**Delivery.** ConsumeAMQP with Auto-Acknowledge Messages ``false`` (the default) acknowledges a
trigger's messages (``basic_ack`` of the last one, ``multiple``) only once its session is durable
(``session.commit_async(on_success=...)``): at-least-once, as NiFi's. A commit refused gives them
back to the queue (``basic_nack``, requeue); a lost connection or a kill leaves them
unacknowledged, and the broker delivers them again. ``true``: the broker counts them delivered
when it sends them (at-most-once).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import TYPE_CHECKING, Any, Callable, Mapping

from flowactors.processors._common import REGEX_VALIDATOR, boolean_property, route_failure
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import FAILURE, reason
from flowactors.sdk.services import SSLContextService

if TYPE_CHECKING:
    import pika

log = logging.getLogger(__name__)

#: the attributes of a message's properties (``amqp$<name>``) and pika's name for each
PROPERTY_ATTRIBUTES = {"amqp$appId": "app_id", "amqp$contentEncoding": "content_encoding",
                       "amqp$contentType": "content_type", "amqp$deliveryMode": "delivery_mode",
                       "amqp$priority": "priority", "amqp$correlationId": "correlation_id",
                       "amqp$replyTo": "reply_to", "amqp$expiration": "expiration", "amqp$messageId": "message_id",
                       "amqp$timestamp": "timestamp", "amqp$type": "type", "amqp$userId": "user_id",
                       "amqp$clusterId": "cluster_id"}
HEADERS_ATTRIBUTE = "amqp$headers"


def connection_errors() -> tuple[type[BaseException], ...]:
    """What breaks a connection or a channel: the processor drops both and connects again.
    pika is imported where first used, here and below, so that ``import flowactors.processors``
    does not pay for it (about 40 ms) in a flow without AMQP."""
    import pika.exceptions

    return pika.exceptions.AMQPError, OSError


def broker_addresses(text: str) -> list[tuple[str, int]]:
    """The Brokers property's ``host:port`` pairs; ValueError names one that is not."""
    found = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        host, _, port = part.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{part!r} is not host:port")
        found.append((host, int(port)))
    if not found:
        raise ValueError("names no broker (host:port)")
    return found


def _brokers_problem(text: str) -> str | None:
    try:
        broker_addresses(text)
    except ValueError as err:
        return str(err)
    return None


BROKERS = PropertyDescriptor("Brokers", "host:port, comma-separated (tried in order); when set, Host Name and Port "
                                        "are ignored", validator=_brokers_problem)
COMMON = (BROKERS,
          PropertyDescriptor("Host Name", "The broker's host (without Brokers)", default="localhost"),
          PropertyDescriptor("Port", "The broker's port (without Brokers)", default="5672",
                             validator=validators.POSITIVE_INTEGER),
          PropertyDescriptor("Virtual Host", "The virtual host (unset: /)"),
          PropertyDescriptor("Username", "The user to log in as"),
          PropertyDescriptor("Password", "The user's password", sensitive=True),
          PropertyDescriptor("AMQP Version", "Only 0.9.1", required=True, default="0.9.1", allowable_values=("0.9.1",)),
          PropertyDescriptor("SSL Context Service", "TLS settings (TLS is used when set)", service=SSLContextService),
          boolean_property("Client Certificate Authentication Enabled", False,
                           "Log in with the TLS client certificate (SASL EXTERNAL) instead of a user and password"))
#: NiFi 1's names of the properties both processors have (AbstractAMQPProcessor.migrateProperties)
NIFI_COMMON_NAMES = {"User Name": "Username", "ssl-context-service": "SSL Context Service",
                     "cert-authentication": "Client Certificate Authentication Enabled"}


def common_problems(values: Mapping[str, str]) -> list[str]:
    """NiFi's checks of the login settings."""
    certificate = values.get("Client Certificate Authentication Enabled", "false").lower() == "true"
    login = "Username" in values and "Password" in values
    if certificate and ("Username" in values or "Password" in values):
        return ["Username and Password cannot be set with Client Certificate Authentication Enabled"]
    if certificate and "SSL Context Service" not in values:
        return ["Client Certificate Authentication Enabled needs an SSL Context Service"]
    if not certificate and not login:
        return ["set Username and Password (or Client Certificate Authentication Enabled)"]
    return []


def why(err: BaseException) -> str:
    """What went wrong, in words: pika wraps a failed connection in errors that have no message of
    their own (the last attempt's cause is what is said), and a channel the broker closed carries
    the broker's reply (``NOT_FOUND - no queue 'q' in vhost '/'``)."""
    import pika.exceptions

    while getattr(err, "exceptions", None):
        err = err.exceptions[-1]
    err = getattr(err, "exception", None) or err
    if isinstance(err, pika.exceptions.AMQPConnectionError) and err.args and isinstance(err.args[0], BaseException):
        return why(err.args[0])
    if isinstance(err, (pika.exceptions.ChannelClosedByBroker, pika.exceptions.ConnectionClosedByBroker)):
        return f"{err.reply_text} ({err.reply_code})"
    return reason(err) if str(err) else type(err).__name__


def _addresses(context: ProcessContext) -> list[tuple[str, int]]:
    brokers = context.property("Brokers").evaluate()
    if not brokers:
        return [(context.property("Host Name").evaluate() or "localhost", int(context.property("Port").evaluate()))]
    return broker_addresses(brokers)


class AmqpLink:
    """One connection and channel to the first broker of a processor's settings that accepts;
    ``where`` names it (``amqp://host:port/vhost``). ``AmqpUnavailable`` says why none did."""

    def __init__(self, context: ProcessContext):
        import pika

        prop = context.property
        vhost = prop("Virtual Host").evaluate() or "/"
        tls = context.service("SSL Context Service", SSLContextService).create_context() \
            if prop("SSL Context Service").is_set else None
        credentials = pika.credentials.ExternalCredentials() \
            if prop("Client Certificate Authentication Enabled").as_bool() else \
            pika.PlainCredentials(prop("Username").evaluate() or "", prop("Password").evaluate() or "")
        addresses = _addresses(context)
        parameters = [pika.ConnectionParameters(host, port, vhost, credentials, connection_attempts=1,
                                                ssl_options=pika.SSLOptions(tls, host) if tls else None,
                                                socket_timeout=10, blocked_connection_timeout=60)
                      for host, port in addresses]
        brokers = ", ".join(f"{h}:{p}" for h, p in addresses)
        try:
            self.connection = pika.BlockingConnection(parameters)
        except connection_errors() as err:
            raise AmqpUnavailable(f"cannot connect to the AMQP broker at {brokers} (virtual host {vhost!r}): "
                                  f"{why(err)}") from None
        self.where = f"amqp://{','.join(f'{h}:{p}' for h, p in addresses)}/{vhost.lstrip('/')}"
        self.thread = threading.get_ident()
        try:
            self.channel = self.connection.channel()
        except connection_errors() as err:
            self.close()
            raise AmqpUnavailable(f"cannot open a channel at {self.where}: {why(err)}") from None

    def prepare(self, what: str, action: Callable[[], None]) -> None:
        """Run ``action`` on the new link (set the channel up); if the broker refuses, close the
        link and raise AmqpUnavailable saying ``what`` failed and why."""
        try:
            action()
        except connection_errors() as err:
            self.close()
            raise AmqpUnavailable(f"cannot {what} at {self.where}: {why(err)}") from None

    def in_own_thread(self, action: Callable[[], None]) -> None:
        """Run ``action`` on this link now when called from the thread that uses it, else at that
        thread's next call into the connection (pika's connections are not thread-safe)."""
        if threading.get_ident() == self.thread:
            action()
        else:
            self.connection.add_callback_threadsafe(action)

    def close(self) -> None:
        try:
            if self.connection.is_open:
                self.connection.process_data_events(0)   # acknowledgements handed over from other threads
                self.connection.close()
        except connection_errors() as err:
            log.debug("closing the AMQP connection: %s", why(err))


class AmqpUnavailable(Exception):
    """No AMQP broker of the processor's settings accepted a connection (one sentence: where, why)."""


class _Amqp(Processor):
    """What both processors share: their link, made at the first trigger and made again after
    an error broke it; a broker that cannot be reached makes the trigger log why and yield."""

    def __init__(self) -> None:
        self._link: AmqpLink | None = None

    def custom_validate(self, values) -> list[str]:
        return common_problems(values)

    def _connected(self, context: ProcessContext) -> AmqpLink | None:
        """The link, checked first (pika notices a connection the broker closed, say for missed
        heartbeats while the processor had nothing to do, only when it next reads), else a new
        one; None after logging why none can be made and yielding."""
        link = self._link
        if link is not None:
            try:
                link.connection.process_data_events(0)
                if link.connection.is_open and link.channel.is_open:
                    return link
            except connection_errors() as err:
                log.warning("%s: the connection to %s broke (%s); its unacknowledged messages go back to the queue; "
                            "connecting again", context.name, link.where, why(err))
        self._drop()
        try:
            self._link = self._open(context)
        except AmqpUnavailable as err:
            log.error("%s: %s; yielding", context.name, err)
            context.yield_()
            return None
        return self._link

    def _open(self, context: ProcessContext) -> AmqpLink:
        return AmqpLink(context)

    def _drop(self) -> None:
        if self._link is not None:
            self._link.close()
            self._link = None

    def on_stopped(self, context: ProcessContext) -> None:
        self._drop()


# ---------------------------------------------------------------------------------- ConsumeAMQP
HEADER_FORMATS = ("Comma-Separated String", "JSON String", "FlowFile Attributes")


def _header_text(value: Any) -> str:
    """A header value as NiFi's Java client prints it (booleans lower case, bytes as text)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)


def header_attributes(headers: Mapping[str, Any], context: ProcessContext) -> dict[str, str]:
    """The attributes a message's headers give, by Header Output Format."""
    form = context.property("Header Output Format").evaluate()
    if form == "FlowFile Attributes":
        prefix = context.property("Header Key Prefix").evaluate()
        return {f"{prefix}.{key}": _header_text(value) for key, value in headers.items() if value is not None}
    if form == "JSON String":
        return {HEADERS_ATTRIBUTE: json.dumps(headers, default=_header_text, ensure_ascii=False)}
    separator = context.property("Header Separator").evaluate() or ","
    text = separator.join(key if value is None else f"{key}={_header_text(value)}" for key, value in headers.items())
    braces = context.property("Remove Curly Braces").evaluate().lower() != "true"
    return {HEADERS_ATTRIBUTE: "{" + text + "}" if braces else text}


def message_attributes(method, properties, context: ProcessContext) -> dict[str, str]:
    """The attributes of one delivered message (NiFi's, with ``amqp$type`` its own: see docs)."""
    attributes = {}
    for attribute, name in PROPERTY_ATTRIBUTES.items():
        value = getattr(properties, name)
        if value is not None:
            attributes[attribute] = str(value * 1000 if name == "timestamp" else value)
    attributes["amqp$routingKey"] = method.routing_key
    attributes["amqp$exchange"] = method.exchange
    if properties.headers is not None:
        attributes.update(header_attributes(properties.headers, context))
    return attributes


class ConsumeAMQP(_Amqp):
    """Takes up to Batch Size messages from Queue a trigger, one FlowFile each (the body, and the
    message's properties, routing key, exchange and headers as attributes) to ``success``, and
    acknowledges them as the module docstring says. No message waiting: the processor yields. A
    broker that cannot be reached, or a Queue that does not exist: an error saying so, and it
    yields. Provenance: RECEIVE, transit URI ``amqp://host:port/vhost/queue``."""

    description = "Receives messages from an AMQP 0-9-1 queue (RabbitMQ)"
    input_required = False
    NIFI_TYPE = "org.apache.nifi.amqp.processors.ConsumeAMQP"
    NIFI_PROPERTY_NAMES = {**NIFI_COMMON_NAMES, "auto.acknowledge": "Auto-Acknowledge Messages",
                           "batch.size": "Batch Size", "prefetch.count": "Prefetch Count",
                           "header.format": "Header Output Format", "header.key.prefix": "Header Key Prefix",
                           "header.separator": "Header Separator", "remove.curly.braces": "Remove Curly Braces"}
    #: NiFi 1's ssl-client-auth NiFi 2 drops; pika has no limit on a message's size to set
    NIFI_IGNORED = ("ssl-client-auth", "Max Inbound Message Body Size")
    SUCCESS = Relationship("success", "The messages received")
    relationships = (SUCCESS,)
    properties = (PropertyDescriptor("Queue", "The existing queue to consume from", required=True,
                                     validator=validators.NON_EMPTY),
                  boolean_property("Auto-Acknowledge Messages", False, "true: the broker counts a message delivered "
                                   "when it sends it (at-most-once); false: acknowledged after the commit"),
                  PropertyDescriptor("Batch Size", "Messages a trigger takes at most", required=True, default="10",
                                     validator=validators.POSITIVE_INTEGER),
                  PropertyDescriptor("Prefetch Count", "Unacknowledged messages the broker sends ahead at most "
                                     "(0: no limit)", required=True, default="0",
                                     validator=lambda v: None if v.isdigit() and int(v) <= 65535 else "must be 0 to 65535"),
                  PropertyDescriptor("Header Output Format", "How the headers become attributes", required=True,
                                     default=HEADER_FORMATS[0], allowable_values=HEADER_FORMATS),
                  PropertyDescriptor("Header Key Prefix", "FlowFile Attributes format: <prefix>.<header>",
                                     required=True, default="consume.amqp", validator=validators.NON_EMPTY),
                  PropertyDescriptor("Header Separator", "Comma-Separated String format: between headers",
                                     default=",", validator=lambda v: None if len(v) == 1 else "must be one character"),
                  PropertyDescriptor("Remove Curly Braces", "Comma-Separated String format: no { } around",
                                     default="False", allowable_values=("True", "False")),
                  *COMMON)

    def __init__(self) -> None:
        super().__init__()
        self._waiting: list[tuple[Any, Any, bytes]] = []

    def _open(self, context: ProcessContext) -> AmqpLink:
        link = AmqpLink(context)
        queue = context.property("Queue").evaluate()
        self._waiting = []

        def consume() -> None:
            link.channel.basic_qos(prefetch_count=int(context.property("Prefetch Count").evaluate()))
            link.channel.basic_consume(queue, lambda _channel, method, properties, body: self._waiting.append(
                (method, properties, body)), auto_ack=context.property("Auto-Acknowledge Messages").as_bool())

        link.prepare(f"consume from the queue {queue!r}", consume)
        return link

    def on_trigger(self, context: ProcessContext, session) -> None:
        link = self._connected(context)   # which reads what the broker sent
        if link is None:
            return
        count = int(context.property("Batch Size").evaluate())
        taken, self._waiting = self._waiting[:count], self._waiting[count:]
        if not taken:
            context.yield_()
            return
        transit = f"{link.where}/{context.property('Queue').evaluate()}"
        flowfiles = session.write_bytes_batch(session.create_batch(len(taken)), [body for _, _, body in taken])
        for index, (method, properties, _) in enumerate(taken):
            flowfiles[index] = session.put_all_attributes(flowfiles[index],
                                                          message_attributes(method, properties, context))
            session.provenance.receive(flowfiles[index], transit)
        session.transfer_batch(flowfiles, self.SUCCESS.name)
        if context.property("Auto-Acknowledge Messages").as_bool():
            return
        last = taken[-1][0].delivery_tag
        channel = link.channel

        def acknowledge() -> None:
            link.in_own_thread(lambda: _settle(channel, last, True))

        def give_back(err: BaseException) -> None:
            log.error("%s: the session holding %d messages was not committed (%s); they go back to the queue",
                      context.name, len(taken), reason(err))
            link.in_own_thread(lambda: _settle(channel, last, False))

        session.commit_async(on_success=acknowledge, on_failure=give_back)


def _settle(channel, delivery_tag: int, ack: bool) -> None:
    """Acknowledge (or give back) every message up to ``delivery_tag``; on a channel that broke
    since, the broker has given them back already."""
    try:
        if ack:
            channel.basic_ack(delivery_tag, multiple=True)
        else:
            channel.basic_nack(delivery_tag, multiple=True, requeue=True)
    except connection_errors() as err:
        log.warning("AMQP: messages up to delivery %d could not be %s (%s); the broker delivers them again",
                    delivery_tag, "acknowledged" if ack else "given back", why(err))


# ---------------------------------------------------------------------------------- PublishAMQP
HEADER_SOURCES = ("AMQP_HEADERS_ATTRIBUTE", "FLOWFILE_ATTRIBUTES")
GUARANTEES = ("AT_MOST_ONCE", "AT_LEAST_ONCE")


def headers_from_text(text: str, separator: str) -> dict[str, str | None]:
    """The headers of an ``amqp$headers`` text (``key=value`` or ``key``, between separators),
    as NiFi reads it: a part with two ``=`` or an empty key is skipped with a warning."""
    headers: dict[str, str | None] = {}
    for part in text.split(separator):
        key, *rest = part.split("=")
        if len(rest) > 1 or not key.strip():
            log.warning("PublishAMQP: skipped the malformed header %r of %r", part, text)
            continue
        headers[key.strip()] = rest[0].strip() if rest else None
    return headers


def message_properties(attributes: Mapping[str, str], headers: dict[str, Any]) -> pika.BasicProperties:
    """A message's properties from the FlowFile's ``amqp$`` attributes (a value that does not fit
    its property is skipped with a warning, as NiFi does) and ``headers``."""
    import pika

    values: dict[str, Any] = {}
    for attribute, name in PROPERTY_ATTRIBUTES.items():
        text = attributes.get(attribute)
        if text is None:
            continue
        try:
            values[name] = int(text) // 1000 if name == "timestamp" else \
                int(text) if name in ("delivery_mode", "priority") else text
        except ValueError:
            log.warning("PublishAMQP: %s is %r, not a number; the message goes without it", attribute, text)
    return pika.BasicProperties(headers=headers, **values)


class PublishAMQP(_Amqp):
    """Publishes each FlowFile's content as one message to Exchange Name with Routing Key, its
    properties from the ``amqp$`` attributes and its headers from ``amqp$headers`` or the
    attributes Headers Pattern matches. With Delivery Guarantee AT_LEAST_ONCE the broker confirms
    each message (publisher confirms, ``mandatory``): one it refuses or cannot route to a queue
    sends the FlowFile to ``failure``. A FlowFile larger than Maximum Input FlowFile Size, or whose
    Routing Key evaluates to nothing, goes to ``failure`` too, and with AT_LEAST_ONCE one whose
    publish the broker answers by closing the channel (a missing exchange). A connection or channel
    found broken while publishing otherwise sends that FlowFile back to its queue (NiFi's
    rollback); the processor then yields and connects again. A broker that cannot
    be reached: the FlowFiles stay queued, an error says why, and the processor yields.
    Provenance: SEND, transit URI ``amqp://host:port/vhost/E:<exchange>/RK:<routing key>``."""

    description = "Publishes messages to an AMQP 0-9-1 exchange (RabbitMQ)"
    NIFI_TYPE = "org.apache.nifi.amqp.processors.PublishAMQP"
    NIFI_PROPERTY_NAMES = {**NIFI_COMMON_NAMES, "header.separator": "Header Separator"}
    NIFI_IGNORED = ("ssl-client-auth",)   # NiFi 2 drops it
    SUCCESS = Relationship("success", "FlowFiles published")
    relationships = (SUCCESS, Relationship(FAILURE.name, "FlowFiles that could not be published (the reason in "
                                                         "flowactors.failure.reason)"))
    properties = (PropertyDescriptor("Exchange Name", "The exchange (empty: the default exchange)", required=True,
                                     default="", expression_language=True),
                  PropertyDescriptor("Routing Key", "The routing key (the queue's name on the default exchange)",
                                     required=True, expression_language=True, validator=validators.NON_EMPTY),
                  PropertyDescriptor("Delivery Guarantee", "AT_MOST_ONCE: sent without waiting; AT_LEAST_ONCE: the "
                                     "broker confirms each message, an unroutable one goes to failure", required=True,
                                     default=GUARANTEES[0], allowable_values=GUARANTEES),
                  PropertyDescriptor("Maximum Input FlowFile Size", "Larger FlowFiles go to failure unread",
                                     required=True, default="128 MB", validator=validators.DATA_SIZE),
                  PropertyDescriptor("Headers Source", "Where the headers come from", required=True,
                                     default=HEADER_SOURCES[0], allowable_values=HEADER_SOURCES),
                  PropertyDescriptor("Headers Pattern", "FLOWFILE_ATTRIBUTES: the attributes (whole name) that become "
                                     "headers", validator=REGEX_VALIDATOR),
                  PropertyDescriptor("Header Separator", "AMQP_HEADERS_ATTRIBUTE: between the headers of amqp$headers",
                                     default=",", validator=lambda v: None if len(v) == 1 else "must be one character"),
                  *COMMON)

    def custom_validate(self, values) -> list[str]:
        problems = common_problems(values)
        if values.get("Headers Source") == "FLOWFILE_ATTRIBUTES" and not values.get("Headers Pattern"):
            problems.append("Headers Source FLOWFILE_ATTRIBUTES needs a Headers Pattern")
        return problems

    def _open(self, context: ProcessContext) -> AmqpLink:
        link = AmqpLink(context)
        if context.property("Delivery Guarantee").evaluate() == "AT_LEAST_ONCE":
            link.prepare("turn publisher confirms on", link.channel.confirm_delivery)
        return link

    def on_trigger(self, context: ProcessContext, session) -> None:
        link = self._connected(context)
        if link is None:
            return
        for _ in range(context.batch_size):
            flowfile = session.get()
            if flowfile is None:
                return
            if not self._publish(context, session, link, flowfile):
                self._drop()
                context.yield_()
                return

    def _headers(self, context: ProcessContext, attributes: Mapping[str, str]) -> dict[str, Any]:
        if context.property("Headers Source").evaluate() == "FLOWFILE_ATTRIBUTES":
            pattern = re.compile(context.property("Headers Pattern").evaluate() or "")
            return {key: value for key, value in attributes.items() if pattern.fullmatch(key)}
        text = attributes.get(HEADERS_ATTRIBUTE)
        return {} if text is None else headers_from_text(text, context.property("Header Separator").evaluate() or ",")

    def _publish(self, context: ProcessContext, session, link: AmqpLink, flowfile) -> bool:
        """Publish one FlowFile and route it; False when the connection broke doing so: with
        publisher confirms a channel the broker closed is this publish's answer (failure),
        otherwise the FlowFile goes back to its queue."""
        import pika.exceptions

        limit = context.property("Maximum Input FlowFile Size").as_data_size()
        if flowfile.size > limit:
            route_failure(context, session, flowfile, f"the FlowFile has {flowfile.size} bytes, more than the "
                                                      f"Maximum Input FlowFile Size ({limit} bytes)")
            return True
        routing_key = context.property("Routing Key").evaluate(flowfile) or ""
        exchange = context.property("Exchange Name").evaluate(flowfile) or ""
        if not routing_key:
            route_failure(context, session, flowfile, "Routing Key evaluates to nothing")
            return True
        properties = message_properties(flowfile.attributes, self._headers(context, flowfile.attributes))
        confirmed = context.property("Delivery Guarantee").evaluate() == "AT_LEAST_ONCE"
        try:
            link.channel.basic_publish(exchange, routing_key, session.read_bytes(flowfile), properties,
                                       mandatory=confirmed)
        except (pika.exceptions.UnroutableError, pika.exceptions.NackError) as err:
            what = "could not route it to any queue" if isinstance(err, pika.exceptions.UnroutableError) else \
                "refused it"
            route_failure(context, session, flowfile, f"the broker {what} (exchange {exchange!r}, routing key "
                                                      f"{routing_key!r})")
            return True
        except connection_errors() as err:
            if confirmed and isinstance(err, pika.exceptions.ChannelClosedByBroker):   # this publish's answer
                route_failure(context, session, flowfile, f"publishing through {link.where} failed (the connection "
                                                          f"is made again): {why(err)}")
            else:   # the connection, or the channel, broke: not the FlowFile's fault (NiFi rolls back)
                log.warning("%s: publishing through %s failed (%s); the FlowFile goes back to the queue and the "
                            "connection is made again", context.name, link.where, why(err))
                session.give_back([flowfile.uuid], lambda taken, _now: taken)
            return False
        session.provenance.send(flowfile, f"{link.where}/E:{exchange}/RK:{routing_key}")
        session.transfer(flowfile, self.SUCCESS)
        return True
