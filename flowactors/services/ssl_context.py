"""The SSL context services: StandardSSLContextService, StandardRestrictedSSLContextService and
PEMEncodedSSLContextProvider, as NiFi's, giving Python ``ssl.SSLContext`` objects to the
processors that connect (InvokeHTTP) or listen (docs/http.md, "SSL context services").

**Stores.** A keystore (a private key and its certificate chain) and a truststore (the
certificates trusted to sign a peer's) are files of type ``PKCS12`` (read with ``cryptography``)
or ``PEM`` (a flowactors addition: the keystore a file holding the key and the chain, the
truststore a bundle of certificates). NiFi's ``JKS`` is refused in one sentence naming the
conversion, because no maintained Python library reads it (pyjks, the one there is, has had no
release since 2017); NiFi 2's ``BCFKS`` (Bouncy Castle's FIPS store) likewise.

**Enabling** reads and checks everything once: a missing file, a wrong password, a store that is
not what its type says, a key that does not match its certificate, or a store without a key where
one is needed, refuses to enable with one sentence naming the property and the file (never a
password). The key is kept in memory encrypted under a random password of this process and
written, for the moment ``ssl`` loads it, to a private temporary file (Python's ``ssl`` loads a
key only from a file).

**TLS Protocol.** ``TLS`` (and NiFi's ``SSL``): TLS 1.2 or 1.3, whichever the peers agree;
``TLSv1.2`` or ``TLSv1.3``: that version only. Older versions are not offered (OpenSSL here
refuses them by default).
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from flowactors.sdk.processor import PropertyDescriptor
from flowactors.sdk.services import ControllerService, ServiceContext, ServiceEnableError, SSLContextService

PKCS12, PEM, JKS, BCFKS = "PKCS12", "PEM", "JKS", "BCFKS"
_PROTOCOLS = {"SSL": None, "TLS": None, "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
#: the versions StandardRestrictedSSLContextService and PEMEncodedSSLContextProvider offer
_RESTRICTED = ("TLS", "TLSv1.2", "TLSv1.3")
_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_CLIENT_AUTH = {"NONE": ssl.CERT_NONE, "WANT": ssl.CERT_OPTIONAL, "REQUIRED": ssl.CERT_REQUIRED}


class StoreError(ValueError):
    """A store could not be read; the message is one sentence without the password."""


@dataclass(frozen=True)
class KeyMaterial:
    """A private key (PEM, encrypted under ``password``) and its certificate chain (PEM)."""

    key_pem: bytes
    chain_pem: bytes
    password: bytes


def _pem(certificates) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding

    return b"".join(c.public_bytes(Encoding.PEM) for c in certificates)


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise StoreError(f"the {what} {path!r} cannot be read: {err.strerror or err}") from None


def _refuse_unreadable_type(data: bytes, kind: str, what: str, path: str) -> None:
    if kind == JKS or data[:4] == _JKS_MAGIC:
        raise StoreError(f"the {what} {path!r} is a JKS store, which flowactors cannot read (no maintained Python "
                         f"library reads JKS): convert it with 'keytool -importkeystore -srckeystore {path} "
                         f"-destkeystore <new>.p12 -deststoretype pkcs12' and name the PKCS12 file")
    if kind == BCFKS:
        raise StoreError(f"the {what} {path!r} is a BCFKS store, which flowactors cannot read: convert it to PKCS12")


def _key_material(key, certificates: list, what: str, path: str) -> KeyMaterial:
    """The key and its chain, checked to belong together, the key re-encrypted for this process."""
    from cryptography.hazmat.primitives.serialization import (BestAvailableEncryption, Encoding, PrivateFormat,
                                                              PublicFormat)

    if key is None or not certificates:
        raise StoreError(f"the {what} {path!r} holds no private key with its certificate")
    public = key.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    if certificates[0].public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo) != public:
        raise StoreError(f"the {what} {path!r}: the private key does not belong to its first certificate")
    password = secrets.token_bytes(24).hex().encode()
    key_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(password))
    return KeyMaterial(key_pem, _pem(certificates), password)


def _open_pkcs12(data: bytes, password: str | None, what: str, path: str) -> tuple[Any, list]:
    """A PKCS12 store's private key (or None) and certificates, its own certificate first."""
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError:
        raise StoreError(f"the {what} {path!r} cannot be opened: the {what.capitalize()} Password is wrong or the "
                         f"file is not a PKCS12 store") from None
    own = [store.cert.certificate] if store.cert is not None else []
    return store.key, own + [c.certificate for c in store.additional_certs]


def load_keystore(path: str, kind: str, store_password: str | None, key_password: str | None) -> KeyMaterial:
    """The key and chain of a keystore file (see the module docstring); ``StoreError`` says why not."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from cryptography.x509 import load_pem_x509_certificates

    data = _read(path, "keystore")
    _refuse_unreadable_type(data, kind, "keystore", path)
    if kind == PKCS12:
        return _key_material(*_open_pkcs12(data, store_password, "keystore", path), "keystore", path)
    password = key_password or store_password
    try:
        key = load_pem_private_key(data, password.encode() if password else None)
    except (ValueError, TypeError) as err:
        reason = "the key is encrypted and the password is wrong or missing" if "encrypt" in str(err).lower() \
            or "password" in str(err).lower() or isinstance(err, TypeError) else "it holds no PEM private key"
        raise StoreError(f"the keystore {path!r} cannot be read as PEM: {reason}") from None
    try:
        certificates = load_pem_x509_certificates(data)
    except ValueError:
        certificates = []
    return _key_material(key, certificates, "keystore", path)


def load_truststore(path: str, kind: str, password: str | None) -> bytes:
    """The trusted certificates of a truststore file, as PEM; ``StoreError`` says why not."""
    from cryptography.x509 import load_pem_x509_certificates

    data = _read(path, "truststore")
    _refuse_unreadable_type(data, kind, "truststore", path)
    if kind == PKCS12:
        _, certificates = _open_pkcs12(data, password, "truststore", path)
    else:
        try:
            certificates = load_pem_x509_certificates(data)
        except ValueError:
            certificates = []
    if not certificates:
        raise StoreError(f"the truststore {path!r} holds no certificate")
    return _pem(certificates)


def build_context(protocol: str, key: KeyMaterial | None, trusted_pem: bytes | None, server_side: bool,
                  client_auth: str) -> ssl.SSLContext:
    """A client's or a server's context (``SSLContextService.create_context``'s contract)."""
    if client_auth not in _CLIENT_AUTH:
        raise ValueError(f"client_auth must be one of {', '.join(_CLIENT_AUTH)}, not {client_auth!r}")
    if server_side and key is None:
        raise ValueError("a server needs a keystore (its key and certificate), and this SSL context service has none")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server_side else ssl.PROTOCOL_TLS_CLIENT)
    version = _PROTOCOLS.get(protocol)
    context.minimum_version = version or ssl.TLSVersion.TLSv1_2
    if version is not None:
        context.maximum_version = version
    if trusted_pem is not None:
        context.load_verify_locations(cadata=trusted_pem.decode())
    elif not server_side:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if server_side:
        context.verify_mode = _CLIENT_AUTH[client_auth]
    if key is not None:
        with tempfile.TemporaryDirectory(prefix="flowactors-tls-") as folder:   # mode 0700: this user only
            chain, key_file = os.path.join(folder, "chain.pem"), os.path.join(folder, "key.pem")
            Path(chain).write_bytes(key.chain_pem)
            Path(key_file).write_bytes(key.key_pem)
            context.load_cert_chain(chain, key_file, password=key.password)
    return context


def _store_types(description: str) -> PropertyDescriptor:
    return PropertyDescriptor(description, f"The type of the {description.split()[0].lower()} file: PKCS12 or PEM "
                              f"(JKS and BCFKS are refused, saying how to convert)",
                              allowable_values=(PKCS12, PEM, JKS, BCFKS))


class _ContextFromMaterial(ControllerService, SSLContextService):
    """What the services share: the material loaded when enabled, a context made from it."""

    def __init__(self) -> None:
        self._protocol = "TLS"
        self._key: KeyMaterial | None = None
        self._trusted: bytes | None = None

    def create_context(self, server_side: bool = False, client_auth: str = "NONE") -> ssl.SSLContext:
        return build_context(self._protocol, self._key, self._trusted, server_side, client_auth)

    def has_keystore(self) -> bool:
        return self._key is not None

    def has_truststore(self) -> bool:
        return self._trusted is not None

    def on_disabled(self, context: ServiceContext) -> None:
        self._key = self._trusted = None


class StandardSSLContextService(_ContextFromMaterial):
    """A keystore and a truststore from files (see the module docstring)."""

    description = "TLS contexts from a keystore and a truststore file (PKCS12 or PEM)"
    NIFI_PROPERTY_NAMES = {"key-password": "Key Password", "SSL Protocol": "TLS Protocol"}
    PROTOCOLS: tuple[str, ...] = ("SSL", "TLS", "TLSv1.2", "TLSv1.3")
    properties = (
        PropertyDescriptor("Keystore Filename", "The keystore: a private key and its certificate chain"),
        PropertyDescriptor("Keystore Password", "The keystore's password (PEM: the key's, unless Key Password)",
                           sensitive=True),
        PropertyDescriptor("Key Password", "The private key's password, when it differs (PEM keystores)",
                           sensitive=True),
        _store_types("Keystore Type"),
        PropertyDescriptor("Truststore Filename", "The certificates trusted to sign a peer's; unset: a client "
                           "trusts the system's certificate authorities"),
        PropertyDescriptor("Truststore Password", "The truststore's password", sensitive=True),
        _store_types("Truststore Type"),
        PropertyDescriptor("TLS Protocol", "TLS (and SSL): 1.2 or 1.3 as the peers agree; TLSv1.2 or TLSv1.3: "
                           "that version only", default="TLS", allowable_values=PROTOCOLS),
    )

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        problems = []
        for store in ("Keystore", "Truststore"):
            if values.get(f"{store} Filename") and not values.get(f"{store} Type"):
                problems.append(f"{store} Type must be set when {store} Filename is")
        if values.get("Keystore Type") == PKCS12 and values.get("Keystore Filename") \
                and not values.get("Keystore Password"):
            problems.append("Keystore Password must be set for a PKCS12 keystore")
        return problems

    def on_enabled(self, context: ServiceContext) -> None:
        self._protocol = context.property("TLS Protocol").raw or "TLS"
        keystore, truststore = context.property("Keystore Filename").raw, context.property("Truststore Filename").raw
        try:
            self._key = load_keystore(keystore, context.property("Keystore Type").raw or PKCS12,
                                      context.property("Keystore Password").raw,
                                      context.property("Key Password").raw) if keystore else None
            self._trusted = load_truststore(truststore, context.property("Truststore Type").raw or PKCS12,
                                            context.property("Truststore Password").raw) if truststore else None
            self.create_context()   # what OpenSSL itself refuses shows now, not at a processor's first use
        except (StoreError, ssl.SSLError) as err:
            raise ServiceEnableError(str(err)) from None


class StandardRestrictedSSLContextService(StandardSSLContextService):
    """StandardSSLContextService limited to TLS 1.2 and later (NiFi's restricted variant)."""

    description = "TLS contexts from a keystore and a truststore, TLS 1.2 or later only"
    PROTOCOLS = _RESTRICTED
    properties = tuple(replace(d, allowable_values=_RESTRICTED) if d.name == "TLS Protocol" else d
                       for d in StandardSSLContextService.properties)


class PEMEncodedSSLContextProvider(_ContextFromMaterial):
    """NiFi 2's PEM provider: the key, its chain and the trusted authorities as PEM, given in
    properties or (key and chain) files; Certificate Authorities Source SYSTEM trusts the system's."""

    description = "TLS contexts from a PEM private key, certificate chain and certificate authorities"
    NIFI_VALUES = {"Private Key Source": {"Undefined": "UNDEFINED", "Properties": "PROPERTIES", "Files": "FILES"},
                   "Certificate Authorities Source": {"Properties": "PROPERTIES", "System": "SYSTEM"}}
    properties = (
        PropertyDescriptor("TLS Protocol", "As StandardSSLContextService's", required=True, default="TLS",
                           allowable_values=_RESTRICTED),
        PropertyDescriptor("Private Key Source", "Where the key and chain come from", required=True,
                           default="PROPERTIES", allowable_values=("UNDEFINED", "PROPERTIES", "FILES")),
        PropertyDescriptor("Private Key", "The PEM private key (unencrypted)", sensitive=True),
        PropertyDescriptor("Private Key Location", "A file holding the PEM private key (unencrypted)"),
        PropertyDescriptor("Certificate Chain", "The PEM certificate chain of the key"),
        PropertyDescriptor("Certificate Chain Location", "A file holding the PEM certificate chain"),
        PropertyDescriptor("Certificate Authorities Source", "PROPERTIES: Certificate Authorities; SYSTEM: the "
                           "system's", required=True, default="PROPERTIES", allowable_values=("PROPERTIES", "SYSTEM")),
        PropertyDescriptor("Certificate Authorities", "PEM certificates trusted to sign a peer's, or a file "
                           "holding them"),
    )

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        source = values.get("Private Key Source", "PROPERTIES")
        needed = {"PROPERTIES": ("Private Key", "Certificate Chain"),
                  "FILES": ("Private Key Location", "Certificate Chain Location")}.get(source, ())
        if values.get("Certificate Authorities Source", "PROPERTIES") == "PROPERTIES":
            needed += ("Certificate Authorities",)
        return [f"{name} must be set" for name in needed if not values.get(name)]

    def on_enabled(self, context: ServiceContext) -> None:
        from cryptography.hazmat.primitives.serialization import load_pem_private_key
        from cryptography.x509 import load_pem_x509_certificates

        def text(name: str) -> bytes:
            value = context.property(name).raw or ""
            if name.endswith("Location") or (name == "Certificate Authorities" and "-----BEGIN" not in value):
                return _read(value, name)
            return value.encode()

        self._protocol = context.property("TLS Protocol").raw or "TLS"
        source = context.property("Private Key Source").raw
        try:
            if source in ("PROPERTIES", "FILES"):
                suffix = " Location" if source == "FILES" else ""
                try:
                    key = load_pem_private_key(text("Private Key" + suffix), None)
                    chain = load_pem_x509_certificates(text("Certificate Chain" + suffix))
                except (ValueError, TypeError):
                    raise StoreError("the Private Key or the Certificate Chain is not PEM (the key must be "
                                     "unencrypted)") from None
                self._key = _key_material(key, chain, "private key", "Private Key" + suffix)
            if context.property("Certificate Authorities Source").raw == "PROPERTIES":
                try:
                    self._trusted = _pem(load_pem_x509_certificates(text("Certificate Authorities")))
                except ValueError:
                    raise StoreError("the Certificate Authorities hold no PEM certificate") from None
            self.create_context()
        except (StoreError, ssl.SSLError) as err:
            raise ServiceEnableError(str(err)) from None


__all__ = ["PEMEncodedSSLContextProvider", "StandardRestrictedSSLContextService", "StandardSSLContextService"]
