"""The SSL context services against real TLS handshakes (a server and a client context over a
socket pair), with a CA, server and client certificates made at test time (tests/tls_material.py):
PKCS12 and PEM stores, client authentication, protocol versions, and one sentence for a store that
cannot be read."""

from __future__ import annotations

import socket
import ssl
import threading

import pytest

from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.sdk.services import ServiceEnableError
from flowactors.services import (PEMEncodedSSLContextProvider, StandardRestrictedSSLContextService,
                                 StandardSSLContextService)
from flowactors.testing import enable_service
from nifi_flows import group, snapshot
from tls_material import PASSWORD, make_tls_material


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return make_tls_material(tmp_path_factory.mktemp("tls"))


def pkcs12_service(tls, identity=None, kind=StandardSSLContextService, **extra):
    identity = identity or tls.server
    return enable_service(kind, {"Keystore Filename": str(identity.p12), "Keystore Password": PASSWORD,
                                 "Keystore Type": "PKCS12", "Truststore Filename": str(tls.truststore_p12),
                                 "Truststore Password": PASSWORD, "Truststore Type": "PKCS12", **extra})


def handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> tuple[str | None, dict | None, str]:
    """Runs a handshake between the two contexts; returns (the client's error or None, the
    client certificate the server saw, the protocol version the client negotiated)."""
    left, right = socket.socketpair()
    seen: dict = {}

    def serve() -> None:
        try:
            with server.wrap_socket(left, server_side=True) as tls_socket:
                seen["peer"] = tls_socket.getpeercert()
                tls_socket.sendall(b"ok")
        except (ssl.SSLError, OSError) as err:
            seen["error"] = err
            left.close()

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(right, server_hostname="127.0.0.1") as tls_socket:
            assert tls_socket.recv(2) == b"ok"
            version = tls_socket.version()
        error = None
    except (ssl.SSLError, OSError, AssertionError) as err:
        error, version = str(err), ""
        right.close()
    thread.join(5)
    return error, seen.get("peer"), version


def subject(certificate: dict) -> str:
    return ",".join(f"{k}={v}" for rdn in certificate["subject"] for k, v in rdn)


# ------------------------------------------------------------------------------ PKCS12 and PEM
def test_pkcs12_stores_give_a_server_and_a_client_that_authenticate_each_other(tls):
    server = pkcs12_service(tls).create_context(server_side=True, client_auth="REQUIRED")
    client = pkcs12_service(tls, tls.client).create_context()
    error, peer, version = handshake(server, client)
    assert error is None and version in ("TLSv1.2", "TLSv1.3")
    assert subject(peer) == "organizationName=flowactors tests,commonName=flowactors test client"


def test_pem_stores_an_encrypted_key_with_its_key_password(tls, tmp_path):
    # a PEM keystore is one file holding the key and its chain (here the two files concatenated)
    (tmp_path / "server.pem").write_bytes(tls.server.key_encrypted.read_bytes() + tls.server.cert.read_bytes())
    (tmp_path / "client.pem").write_bytes(tls.client.cert.read_bytes() + tls.client.key.read_bytes())
    server = enable_service(StandardSSLContextService, {
        "Keystore Filename": str(tmp_path / "server.pem"), "Keystore Type": "PEM", "Key Password": PASSWORD,
        "Truststore Filename": str(tls.ca_pem), "Truststore Type": "PEM"})
    client = enable_service(StandardSSLContextService, {
        "Keystore Filename": str(tmp_path / "client.pem"), "Keystore Type": "PEM",
        "Truststore Filename": str(tls.ca_pem), "Truststore Type": "PEM"})
    error, peer, _ = handshake(server.create_context(server_side=True, client_auth="WANT"), client.create_context())
    assert error is None and "flowactors test client" in subject(peer)
    assert server.has_keystore() and server.has_truststore()


def test_a_server_the_truststore_does_not_vouch_for_is_refused(tls):
    stranger = pkcs12_service(tls, tls.stranger).create_context(server_side=True)
    client = pkcs12_service(tls, tls.client).create_context()
    error, _, _ = handshake(stranger, client)
    assert error is not None and "CERTIFICATE_VERIFY_FAILED" in error


def test_client_auth_required_refuses_a_client_without_a_certificate_and_want_lets_it_in(tls):
    trusting = enable_service(StandardSSLContextService, {"Truststore Filename": str(tls.ca_pem),
                                                          "Truststore Type": "PEM"})
    assert not trusting.has_keystore()
    anonymous = trusting.create_context()
    required = pkcs12_service(tls).create_context(server_side=True, client_auth="REQUIRED")
    error, _, _ = handshake(required, anonymous)
    assert error is not None
    wanted = pkcs12_service(tls).create_context(server_side=True, client_auth="WANT")
    error, peer, _ = handshake(wanted, anonymous)
    assert error is None and not peer
    with pytest.raises(ValueError, match="a server needs a keystore"):
        trusting.create_context(server_side=True)


@pytest.mark.parametrize("server_version, client_version, agreed", [
    ("TLSv1.2", "TLS", "TLSv1.2"), ("TLS", "TLSv1.3", "TLSv1.3"), ("TLSv1.2", "TLSv1.3", None)])
def test_the_tls_protocol_property_bounds_the_version(tls, server_version, client_version, agreed):
    server = pkcs12_service(tls, **{"TLS Protocol": server_version}).create_context(server_side=True)
    client = pkcs12_service(tls, tls.client, StandardRestrictedSSLContextService,
                            **{"TLS Protocol": client_version}).create_context()
    error, _, version = handshake(server, client)
    assert (version if error is None else None) == agreed


def test_the_restricted_service_offers_no_ssl_protocol():
    assert StandardRestrictedSSLContextService.validate_properties({"TLS Protocol": "SSL"})
    assert not StandardSSLContextService.validate_properties({"TLS Protocol": "SSL"})


def test_the_pem_provider_takes_its_key_chain_and_authorities_as_text_or_files(tls):
    server = enable_service(PEMEncodedSSLContextProvider, {
        "Private Key Source": "FILES", "Private Key Location": str(tls.server.key),
        "Certificate Chain Location": str(tls.server.cert), "Certificate Authorities": str(tls.ca_pem)})
    client = enable_service(PEMEncodedSSLContextProvider, {
        "Private Key": tls.client.key.read_text(), "Certificate Chain": tls.client.cert.read_text(),
        "Certificate Authorities": tls.ca_pem.read_text()})
    error, peer, _ = handshake(server.create_context(server_side=True, client_auth="REQUIRED"), client.create_context())
    assert error is None and "flowactors test client" in subject(peer)
    assert "Private Key must be set" in " ".join(PEMEncodedSSLContextProvider().custom_validate({}))


# ------------------------------------------------------------------------------ refusals
def refusal(properties) -> str:
    with pytest.raises(ServiceEnableError) as caught:
        enable_service(StandardSSLContextService, properties)
    message = str(caught.value)
    assert "\n" not in message and PASSWORD not in message and "wrong-one" not in message
    return message


def test_a_wrong_password_a_missing_file_or_another_kind_of_file_refuses_to_enable(tls, tmp_path):
    assert "the Keystore Password is wrong" in refusal({
        "Keystore Filename": str(tls.server.p12), "Keystore Password": "wrong-one", "Keystore Type": "PKCS12"})
    assert "the Truststore Password is wrong" in refusal({
        "Truststore Filename": str(tls.truststore_p12), "Truststore Password": "wrong-one",
        "Truststore Type": "PKCS12"})
    assert "cannot be read: No such file or directory" in refusal({
        "Truststore Filename": str(tmp_path / "absent.p12"), "Truststore Type": "PKCS12"})
    assert "password is wrong or missing" in refusal({
        "Keystore Filename": str(tls.server.key_encrypted), "Keystore Type": "PEM"})
    assert "holds no certificate" in refusal({"Truststore Filename": str(tls.server.key), "Truststore Type": "PEM"})
    mismatched = tmp_path / "mismatched.pem"
    mismatched.write_bytes(tls.server.key.read_bytes() + tls.client.cert.read_bytes())
    assert "does not belong to its first certificate" in refusal({
        "Keystore Filename": str(mismatched), "Keystore Type": "PEM"})


def test_a_jks_store_is_refused_naming_the_conversion(tls, tmp_path):
    jks = tmp_path / "keystore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + b"\x00" * 60)
    message = refusal({"Keystore Filename": str(jks), "Keystore Password": "wrong-one", "Keystore Type": "JKS"})
    assert "keytool -importkeystore" in message and "-deststoretype pkcs12" in message
    # a JKS file named as PKCS12 is recognised by its first bytes
    assert "is a JKS store" in refusal({"Truststore Filename": str(jks), "Truststore Type": "PKCS12"})


# ------------------------------------------------------------------------------ NiFi flows
def test_a_nifi_1_service_loads_under_nifi_2s_names(tls):
    root = group("root", "TLS", None, None)
    root["controllerServices"] = [{
        "identifier": "ssl", "name": "client TLS", "type": "org.apache.nifi.ssl.StandardSSLContextService",
        "properties": {"Keystore Filename": str(tls.client.p12), "Keystore Password": PASSWORD,
                       "key-password": None, "Keystore Type": "PKCS12", "Truststore Filename": str(tls.truststore_p12),
                       "Truststore Password": PASSWORD, "Truststore Type": "PKCS12", "SSL Protocol": "TLSv1.2"}}]
    flow = flow_from_nifi(snapshot(root, {}))
    properties = flow.services["client TLS"].properties
    assert properties["TLS Protocol"] == "TLSv1.2" and "SSL Protocol" not in properties
    client = enable_service(StandardSSLContextService, properties).create_context()
    error, _, version = handshake(pkcs12_service(tls).create_context(server_side=True), client)
    assert error is None and version == "TLSv1.2"
