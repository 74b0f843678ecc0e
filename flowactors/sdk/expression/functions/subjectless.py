"""Subjectless functions (NiFi guide: Subjectless Functions): they start an expression."""

from __future__ import annotations

import functools
import itertools
import socket
import threading
import urllib.parse
import uuid
from typing import Sequence

from flowactors.sdk.expression.language import (
    Value, to_boolean, Call, EvaluationContext, Date, register_function, Node, render, to_whole)


@register_function("now", subject=False, lazy=True, volatile=True)
def _now(call: Call, ctx: EvaluationContext, subject: Value, args: Sequence[Node]) -> Value:
    return Date(ctx.now())


@register_function("UUID", subject=False, volatile=True)
def _uuid(call: Call, subject: Value) -> Value:
    return str(uuid.uuid4())


@functools.cache
def _fully_qualified_hostname() -> str:
    return socket.getfqdn()  # may ask DNS: once per process is enough


@register_function("hostname", (0, 1), subject=False)
def _hostname(call: Call, subject: Value, qualified: Value = False) -> Value:
    """The host name; hostname(true) asks for the fully qualified one, as NiFi."""
    return _fully_qualified_hostname() if to_boolean(call, qualified) else socket.gethostname()


@functools.cache
def _address() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


@register_function("ip", subject=False)
def _ip(call: Call, subject: Value) -> Value:
    """The IP address of this host."""
    return _address()


_counter = itertools.count()


@register_function("nextInt", subject=False, volatile=True)
def _next_int(call: Call, subject: Value) -> Value:
    """0, 1, 2, ... across every evaluation in this process (NiFi counts per NiFi instance)."""
    return next(_counter)


@register_function("literal", (1, 1), subject=False)
def _literal(call: Call, subject: Value, value: Value) -> Value:
    return value


@register_function("getStateValue", (1, 1), subject=False, lazy=True, volatile=True)
def _get_state_value(call: Call, ctx: EvaluationContext, subject: Value, args: Sequence[Node]) -> Value:
    """A value of the processor's state, where the processor gives its state to the evaluation
    (as NiFi's stateful UpdateAttribute); missing otherwise."""
    key = render(args[0].eval(ctx))
    return None if ctx.state is None else ctx.state.get(key)


@register_function("thread", subject=False, volatile=True)
def _thread(call: Call, subject: Value) -> Value:
    return threading.current_thread().name


@register_function("getUri", (7, 7), subject=False)
def _get_uri(call: Call, subject: Value, scheme: Value, user_info: Value, host: Value, port: Value, path: Value,
             query: Value, fragment: Value) -> Value:
    """A URI from its parts, each quoted where it needs to be (missing or empty parts left out;
    a port of -1 means none, as Java's ``URI``)."""
    def part(value: Value) -> str:
        return "" if value is None else render(value)

    out = []
    if part(scheme):
        out.append(part(scheme) + ":")
    if part(host):
        out.append("//")
        if part(user_info):
            out.append(urllib.parse.quote(part(user_info), safe="!$&'()*+,;=:%") + "@")
        out.append(part(host))
        if part(port) and to_whole(call, port, "port") != -1:
            out.append(f":{to_whole(call, port, 'port')}")
    out.append(urllib.parse.quote(part(path), safe="/!$&'()*+,;=:@%"))
    if part(query):
        out.append("?" + urllib.parse.quote(part(query), safe="/?!$&'()*+,;=:@%"))
    if part(fragment):
        out.append("#" + urllib.parse.quote(part(fragment), safe="/?!$&'()*+,;=:@%"))
    return "".join(out)
