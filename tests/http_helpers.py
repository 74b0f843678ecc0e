"""What the HTTP server tests share (ListenHTTP's, HandleHttpRequest's): a real http.client
request on 127.0.0.1, a request sent from a thread while the test triggers the processor, a
multipart/form-data body, TLS material as a service and as a client's context, and whether a
port is free again."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from typing import Any, Callable

#: ListenHTTP's default Base Path
BASE = "/contentListener"


def request(port: int, method: str, path: str = BASE, body: Any = None, headers: dict | None = None,
            tls: ssl.SSLContext | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request; (status, headers, body) of its answer."""
    connection = (http.client.HTTPSConnection("127.0.0.1", port, context=tls, timeout=60) if tls is not None
                  else http.client.HTTPConnection("127.0.0.1", port, timeout=60))
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def in_background(send: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """``send()`` started in a thread (the test triggers the processor meanwhile); the thread and
    where its outcome goes: ``out["answer"]``, or ``out["error"]`` when it raised."""
    out: dict[str, Any] = {}

    def call() -> None:
        try:
            out["answer"] = send()
        except BaseException as err:
            out["error"] = err

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread, out


def keep_sending(count: int, send: Callable[[int], Any]) -> tuple[list, Callable[[Any], None]]:
    """For ``run_flow``: the list answers go to, and an ``on_started`` that calls ``send(i)`` from a
    thread until ``count`` answers came (for 30 seconds at most), trying again while the flow's
    server is not listening yet."""
    answers: list = []

    def on_started(_controller: Any) -> None:
        def run() -> None:
            deadline = time.monotonic() + 30
            while len(answers) < count and time.monotonic() < deadline:
                try:
                    answers.append(send(len(answers)))
                except OSError:
                    time.sleep(0.05)   # not listening yet

        threading.Thread(target=run, daemon=True).start()

    return answers, on_started


def port_is_free(port: int) -> bool:
    """Whether a server could listen on ``port`` again (connections closing, TIME_WAIT, allowed
    for, as every server allows for them; a socket still listening is not)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
            probe.listen()
        except OSError:
            return False
    return True


def multipart(parts: list[tuple[str, str | None, bytes]]) -> tuple[bytes, str]:
    """A multipart/form-data body of (name, filename or None, content) parts, and its Content-Type."""
    boundary = "flowactors-boundary"
    body = b""
    for name, filename, content in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        body += (f"--{boundary}\r\nContent-Disposition: {disposition}\r\nContent-Type: text/plain\r\n\r\n"
                 .encode() + content + b"\r\n")
    return body + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def ssl_service(material) -> tuple:
    """A StandardSSLContextService of the server's key and the test CA (tests/tls_material.py)."""
    from flowactors.services.ssl_context import StandardSSLContextService
    from tls_material import PASSWORD

    return (StandardSSLContextService, {
        "Keystore Filename": str(material.server.p12), "Keystore Password": PASSWORD, "Keystore Type": "PKCS12",
        "Truststore Filename": str(material.truststore_p12), "Truststore Password": PASSWORD,
        "Truststore Type": "PKCS12"})


def client_tls(material, identity=None) -> ssl.SSLContext:
    """A client's context trusting the test CA, showing ``identity``'s certificate when given."""
    context = ssl.create_default_context(cafile=str(material.ca_pem))
    if identity is not None:
        context.load_cert_chain(str(identity.cert), str(identity.key))
    return context
