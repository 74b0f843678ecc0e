"""The encoding functions: base64Encode, base64Decode, escapeJson, unescapeJson, hash, uuid5,
toString, toBytes."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import uuid
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any, Sequence

from flowactors.sdk.expression.functions.encoding import digest_algorithm   # Java's digest names (shared with the EL)
from flowactors.sdk.record_path.conversions import charset_codec, describe_type, java_text
from flowactors.sdk.record_path.functions.base import EachValue, text_argument
from flowactors.sdk.record_path.functions.registry import check_literal, register
from flowactors.sdk.record_path.nodes import Context, Node
from flowactors.sdk.record_path.shapes import BYTES, STRING
from flowactors.sdk.record_path.values import FieldValue, computed
from flowactors.sdk.records.schema import printable


class _Base64(EachValue):
    """``base64Encode``/``base64Decode``: text (its UTF-8 bytes) to Base64 text and back to text;
    bytes to Base64 bytes and back to bytes."""

    __slots__ = ("encode",)

    def __init__(self, name: str, args: Sequence[Node], position: int, encode: bool) -> None:
        super().__init__(name, args, position)
        self.encode = encode

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        value = fv.value
        if isinstance(value, str):
            data = value.encode("utf-8")
            return computed(base64.b64encode(data).decode("ascii") if self.encode else
                            self._decode(data).decode("utf-8", errors="replace"), fv, STRING)
        if isinstance(value, (bytes, bytearray)):
            return computed(base64.b64encode(value) if self.encode else self._decode(bytes(value)), fv, BYTES)
        raise self.error(f"Argument supplied to {self.name} must be a String or byte[] "
                         f"(field '{fv.name}' is {describe_type(value)})")

    def _decode(self, data: bytes) -> bytes:
        try:
            return base64.b64decode(data + b"=" * (-len(data) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise self.error(f"{self.name}: {data[:40]!r} is not Base64") from None


register("base64Encode", 1)(lambda args, position: _Base64("base64Encode", args, position, True))
register("base64Decode", 1)(lambda args, position: _Base64("base64Decode", args, position, False))


def _json_default(value: Any) -> Any:
    """How escapeJson writes what JSON lacks: bytes as Base64, dates in ISO form, decimals as
    numbers, UUIDs as their text."""
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} has no JSON form")


class _EscapeJson(EachValue):
    """``escapeJson(value)``: the value as compact JSON text (a record or a map an object, an array
    an array, text a JSON string)."""

    __slots__ = ()

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        try:
            text = json.dumps(fv.value, separators=(",", ":"), ensure_ascii=False, default=_json_default,
                              allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise self.error(f"Unable to serialise Record Path value as JSON String: {exc}") from None
        return computed(text, fv, STRING)


register("escapeJson", 1)(lambda args, position: _EscapeJson("escapeJson", args, position))


class _UnescapeJson(EachValue):
    """``unescapeJson(text, [toRecord], [recursive])``: the JSON value the text holds (an object a
    dict, an array a list), of no known type. The flags say whether NiFi makes records or maps of
    objects; both are dicts here, so they change nothing."""

    __slots__ = ()

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        if not isinstance(fv.value, str):
            raise self.error("Argument supplied to unescapeJson must be a String")
        try:
            value = json.loads(fv.value)
        except ValueError as exc:
            raise self.error(f"Unable to deserialize JSON String into Record Path value: {exc}") from None
        return computed(value, fv, None)


register("unescapeJson", 1, 3)(lambda args, position: _UnescapeJson("unescapeJson", args, position))


class _Hash(EachValue):
    """``hash(value, algorithm)``: the hexadecimal digest of the text's UTF-8 bytes (Java's names:
    MD5, SHA, SHA-1, SHA-224, SHA-256, SHA-384, SHA-512, SHA-512/224, SHA-512/256, SHA3-*); the value
    unchanged when the algorithm is missing or empty."""

    __slots__ = ()

    def __init__(self, args: Sequence[Node], position: int) -> None:
        super().__init__("hash", args, position)
        check_literal(args[1], lambda v: digest_algorithm(text_argument(v)))

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        name = self.text_of(1, ctx)
        if not name:
            return fv
        try:
            algorithm = digest_algorithm(name)
        except ValueError as exc:
            raise self.error(f"hash: {exc}") from None
        return computed(hashlib.new(algorithm, (java_text(fv.value) or "").encode("utf-8")).hexdigest(), fv, STRING)


register("hash", 2)(lambda args, position: _Hash(args, position))


class _Uuid5(EachValue):
    """``uuid5(value, [namespace])``: the version 5 UUID of the text (of "" for None) in the
    namespace (a UUID's text; the nil UUID when not given or not text)."""

    __slots__ = ()
    keeps_none = True

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        namespace = uuid.UUID(int=0)
        if len(self.args) > 1:
            values = self.args[1].evaluate(ctx)
            if values and isinstance(values[0].value, str):
                try:
                    namespace = uuid.UUID(values[0].value)
                except ValueError:
                    raise self.error(f"uuid5: the namespace {printable(repr(values[0].value), 80)} is not a "
                                     "UUID") from None
        return computed(str(uuid.uuid5(namespace, java_text(fv.value) or "")), fv, STRING)


register("uuid5", 1, 2)(lambda args, position: _Uuid5("uuid5", args, position))


class _Charset(EachValue):
    """``toString(value, charset)`` (bytes decoded; any other value as its text) and
    ``toBytes(text, charset)`` (text encoded; anything else refused)."""

    __slots__ = ("to_bytes",)

    def __init__(self, name: str, args: Sequence[Node], position: int, to_bytes: bool) -> None:
        super().__init__(name, args, position)
        self.to_bytes = to_bytes
        check_literal(args[1], lambda v: charset_codec(text_argument(v)))

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        try:
            encode, decode = charset_codec(self.text_of(1, ctx) or "UTF-8")
        except ValueError as exc:
            raise self.error(f"{self.name}: {exc}") from None
        value = fv.value
        if self.to_bytes:
            if not isinstance(value, str):
                raise self.error(f"Argument supplied to toBytes must be a String (field '{fv.name}' is "
                                 f"{describe_type(value)})")
            return computed(encode(value), fv, BYTES)
        if isinstance(value, (bytes, bytearray)):
            return computed(decode(bytes(value)), fv, STRING)
        if isinstance(value, (list, tuple)) and all(isinstance(b, int) and -128 <= b < 256 for b in value):
            return computed(decode(bytes(b & 0xFF for b in value)), fv, STRING)
        return computed(java_text(value), fv, STRING)


register("toString", 2)(lambda args, position: _Charset("toString", args, position, False))
register("toBytes", 2)(lambda args, position: _Charset("toBytes", args, position, True))
