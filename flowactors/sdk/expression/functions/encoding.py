"""Encoding and decoding (NiFi guide: Encode/Decode Functions): the escapes of Apache Commons
Text that NiFi uses (JSON, XML, CSV, HTML 3.2 / 4), URL and Base64 encoding, name-based UUIDs and
hashes. A missing subject stays missing."""

from __future__ import annotations

import base64
import binascii
import hashlib
import html
import re
import uuid
from html.entities import codepoint2name
from typing import Callable

from flowactors.sdk.expression.language import (Value, Call, register_function, literal_check, render,
                                                register_string_function)


# --- JSON (as StringEscapeUtils.escapeJson: quotes, backslash, slash, controls, non-ASCII) ---

_JSON_SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
               "\t": "\\t"}


def _escape_json(text: str) -> str:
    out = []
    for c in text:
        if c in _JSON_SHORT:
            out.append(_JSON_SHORT[c])
        elif " " <= c <= "~":
            out.append(c)
        else:  # UTF-16 units, as Java escapes them
            units = c.encode("utf-16-be")
            out.extend(f"\\u{int.from_bytes(units[i:i + 2], 'big'):04X}" for i in range(0, len(units), 2))
    return "".join(out)


_JSON_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|["\\/bfnrt])')
_JSON_LETTERS = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescape_json(text: str) -> str:
    def one(match: re.Match) -> str:
        code = match.group(1)
        if code[0] == "u":
            return chr(int(code[1:], 16))
        return _JSON_LETTERS.get(code, code)
    # surrogate pairs written as two escapes come out as two halves: joined back here
    return _JSON_ESCAPE.sub(one, text).encode("utf-16", "surrogatepass").decode("utf-16")


register_string_function("escapeJson", _escape_json)
register_string_function("unescapeJson", _unescape_json)

# --- XML 1.0 ---

_XML_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;"}
#: characters XML 1.0 cannot hold at all (removed), and the ones it holds only as references
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_XML_REFERENCED = re.compile("[\x7f-\x84\x86-\x9f]")


def _escape_xml(text: str) -> str:
    text = _XML_INVALID.sub("", text)
    text = "".join(_XML_ENTITIES.get(c, c) for c in text)
    return _XML_REFERENCED.sub(lambda m: f"&#{ord(m.group())};", text)


_XML_REFERENCE = re.compile(r"&(amp|lt|gt|quot|apos|#[0-9]+|#[xX][0-9a-fA-F]+);")
_XML_NAMED = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}


def _unescape_xml(text: str) -> str:
    def one(match: re.Match) -> str:
        name = match.group(1)
        if name[0] != "#":
            return _XML_NAMED[name]
        return chr(int(name[2:], 16) if name[1] in "xX" else int(name[1:]))
    return _XML_REFERENCE.sub(one, text)


register_string_function("escapeXml", _escape_xml)
register_string_function("unescapeXml", _unescape_xml)

# --- CSV (RFC 4180) ---

_CSV_SPECIAL = frozenset(',"\r\n')


def _escape_csv(text: str) -> str:
    if not _CSV_SPECIAL.intersection(text):
        return text
    return '"' + text.replace('"', '""') + '"'


def _unescape_csv(text: str) -> str:
    if len(text) < 2 or text[0] != '"' or text[-1] != '"' or not _CSV_SPECIAL.intersection(text[1:-1]):
        return text
    return text[1:-1].replace('""', '"')


register_string_function("escapeCsv", _escape_csv)
register_string_function("unescapeCsv", _unescape_csv)

# --- HTML: 3.2 names the ISO-8859-1 characters, 4 also the Greek letters, symbols and arrows ---

_HTML4 = {chr(code): f"&{name};" for code, name in codepoint2name.items()}
_HTML3 = {c: entity for c, entity in _HTML4.items() if ord(c) < 256}


def _escape_html(table: dict[str, str]) -> Callable[[str], str]:
    return lambda text: "".join(table.get(c, c) for c in text)


register_string_function("escapeHtml3", _escape_html(_HTML3))
register_string_function("escapeHtml4", _escape_html(_HTML4))
register_string_function("unescapeHtml3", lambda text: html.unescape(text))
register_string_function("unescapeHtml4", lambda text: html.unescape(text))

# --- URL (as Java's URLEncoder / URLDecoder with UTF-8, which NiFi uses) ---

_URL_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-*_")
_HEX = frozenset("0123456789abcdefABCDEF")


def _url_encode(text: str) -> str:
    out: list[str] = []
    for byte in text.encode("utf-8", "replace"):
        if byte in _URL_SAFE:
            out.append(chr(byte))
        elif byte == 0x20:
            out.append("+")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def _url_decode(text: str) -> str:
    out = bytearray()
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "%":
            digits = text[i + 1 : i + 3]
            if len(digits) != 2 or not set(digits) <= _HEX:
                raise ValueError(f"invalid escape {text[i:i + 3]!r} at index {i} of {text!r}")
            out.append(int(digits, 16))
            i += 3
        else:
            out += b" " if c == "+" else c.encode("utf-8", "replace")
            i += 1
    return out.decode("utf-8", "replace")


register_string_function("urlEncode", _url_encode)
register_string_function("urlDecode", _url_decode)

# --- Base64 of the UTF-8 bytes ---


def _base64_decode(text: str) -> str:
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{text[:40]!r} is not Base64") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the decoded bytes are not UTF-8 text") from None


register_string_function("base64Encode", lambda text: base64.b64encode(text.encode("utf-8")).decode("ascii"))
register_string_function("base64Decode", _base64_decode)

# --- name-based UUIDs: the subject is the name ---


def _name_uuid(name: str, make: Callable[[uuid.UUID, str], uuid.UUID]) -> None:
    """UUID3 / UUID5 (RFC 4122, MD5 / SHA-1) of the subject in a namespace UUID; a missing
    namespace is the nil UUID, as NiFi's."""

    def impl(call: Call, subject: Value, namespace: Value) -> Value:
        if subject is None:
            return None
        if namespace is None:
            return str(make(uuid.UUID(int=0), render(subject)))
        try:
            space = uuid.UUID(render(namespace))
        except ValueError:
            call.fail(f"the namespace {render(namespace)!r} is not a UUID")
        return str(make(space, render(subject)))

    register_function(name, (1, 1))(impl)


_name_uuid("UUID3", uuid.uuid3)
_name_uuid("UUID5", uuid.uuid5)

# --- hash(algorithm): hexadecimal digest of the UTF-8 text ---

_HASHES = {"MD5": "md5", "SHA": "sha1", "SHA-1": "sha1", "SHA-224": "sha224", "SHA-256": "sha256", "SHA-384": "sha384",
           "SHA-512": "sha512", "SHA-512/224": "sha512_224", "SHA-512/256": "sha512_256", "SHA3-224": "sha3_224",
           "SHA3-256": "sha3_256", "SHA3-384": "sha3_384", "SHA3-512": "sha3_512"}


def digest_algorithm(name: str) -> str:
    algorithm = _HASHES.get(name.upper())
    if algorithm is None:
        raise ValueError(f"unknown hash algorithm {name!r} (one of {', '.join(_HASHES)})")
    return algorithm


@register_function("hash", (1, 1), check=literal_check(digest_algorithm))
def _hash(call: Call, subject: Value, algorithm: Value) -> Value:
    if subject is None:
        return None
    return hashlib.new(digest_algorithm(render(algorithm)), render(subject).encode("utf-8")).hexdigest()
