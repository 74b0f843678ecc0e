"""TLS material made at test time with ``cryptography``: a certificate authority, a server
certificate for 127.0.0.1 and localhost, and a client certificate, each written as PEM files and
as a PKCS12 store with a password. Any test that needs TLS (InvokeHTTP's, ListenHTTP's, the SSL
context services') makes one ``TlsMaterial`` in a temporary folder and reads its paths.

Nothing here is a secret worth keeping: the keys live as long as the test's folder.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: the password of every PKCS12 store and encrypted PEM key written here
PASSWORD = "changeit-42"


@dataclass(frozen=True)
class Identity:
    """One certificate and its key, as files: ``cert`` (PEM), ``key`` (PEM, unencrypted),
    ``key_encrypted`` (PEM, encrypted with PASSWORD), ``p12`` (PKCS12 with key and chain,
    PASSWORD), and ``dn``, its subject as RFC 4514 writes it."""

    cert: Path
    key: Path
    key_encrypted: Path
    p12: Path
    dn: str


@dataclass(frozen=True)
class TlsMaterial:
    """A CA (``ca_pem``; ``truststore_p12``: the CA alone in a PKCS12 store with PASSWORD),
    ``server`` (for 127.0.0.1 and localhost) and ``client``, both signed by the CA, and
    ``stranger``, a certificate for 127.0.0.1 signed by another CA (a server no truststore here trusts)."""

    ca_pem: Path
    truststore_p12: Path
    server: Identity
    client: Identity
    stranger: Identity


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "flowactors tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(subject: str, key, issuer: x509.Name, issuer_key, *, ca: bool = False,
                 server: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                      content_commitment=False, key_encipherment=False,
                                                      data_encipherment=False, key_agreement=False,
                                                      encipher_only=False, decipher_only=False), critical=True)
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write_identity(folder: Path, label: str, cert: x509.Certificate, key, chain: list[x509.Certificate]) -> Identity:
    pem = serialization.Encoding.PEM
    (folder / f"{label}.crt").write_bytes(b"".join(c.public_bytes(pem) for c in [cert, *chain]))
    (folder / f"{label}.key").write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                            serialization.NoEncryption()))
    (folder / f"{label}-encrypted.key").write_bytes(key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(PASSWORD.encode())))
    (folder / f"{label}.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        label.encode(), key, cert, chain, serialization.BestAvailableEncryption(PASSWORD.encode())))
    return Identity(folder / f"{label}.crt", folder / f"{label}.key", folder / f"{label}-encrypted.key",
                    folder / f"{label}.p12", cert.subject.rfc4514_string())


def make_tls_material(folder: Path) -> TlsMaterial:
    """Makes a CA, a server and a client certificate (and a stranger's) under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("flowactors test CA", ca_key, _name("flowactors test CA"), ca_key, ca=True)
    (folder / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (folder / "truststore.p12").write_bytes(pkcs12.serialize_java_truststore(
        [pkcs12.PKCS12Certificate(ca, b"ca")], serialization.BestAvailableEncryption(PASSWORD.encode())))
    server_key, client_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    server = _certificate("127.0.0.1", server_key, ca.subject, ca_key, server=True)
    client = _certificate("flowactors test client", client_key, ca.subject, ca_key)
    other_key = ec.generate_private_key(ec.SECP256R1())
    other_ca = _certificate("another CA", other_key, _name("another CA"), other_key, ca=True)
    stranger_key = ec.generate_private_key(ec.SECP256R1())
    stranger = _certificate("127.0.0.1", stranger_key, other_ca.subject, other_key, server=True)
    return TlsMaterial(folder / "ca.crt", folder / "truststore.p12",
                       _write_identity(folder, "server", server, server_key, [ca]),
                       _write_identity(folder, "client", client, client_key, [ca]),
                       _write_identity(folder, "stranger", stranger, stranger_key, [other_ca]))
