"""NiFi's record field types on Arrow, and the Avro schema mapping.

A record schema is an Arrow schema. Each NiFi field type is an Arrow type; where Arrow has none
of its own, the field's metadata keeps NiFi's (``NIFI_TYPE``) so that Avro -> Arrow -> Avro gives
the Avro schema back:

============  ===============================================  ===================================
NiFi type     Arrow type                                       field metadata / Avro type
============  ===============================================  ===================================
STRING        ``string``                                       ``"string"``
BOOLEAN       ``bool``                                         ``"boolean"``
BYTE          ``int8``                                         ``"int"``
SHORT         ``int16``                                        ``"int"``
INT           ``int32``                                        ``"int"``
LONG          ``int64``                                        ``"long"``
BIGINT        ``decimal128(38, 0)``                            ``nifi.type=BIGINT``; ``"string"``
FLOAT         ``float32``                                      ``"float"``
DOUBLE        ``float64``                                      ``"double"``
DECIMAL(p,s)  ``decimal128(p, s)`` (``decimal256`` past 38)    ``bytes``/``fixed`` + ``decimal``
DATE          ``date32``                                       ``int`` + ``date``
TIME          ``time32("ms")`` / ``time64("us")``              ``int`` + ``time-millis`` / ``long``
                                                               + ``time-micros``
TIMESTAMP     ``timestamp("ms"|"us", tz="UTC")``               ``long`` + ``timestamp-millis|micros``
              (naive: ``local-timestamp-*``)
CHAR          ``string``                                       ``nifi.type=CHAR``; ``"string"``
UUID          ``string``                                       ``nifi.type=UUID``; ``string`` + ``uuid``
ENUM(syms)    ``string``                                       ``nifi.type=ENUM``, ``nifi.enum.symbols``
ARRAY(e)      ``list<e>`` (ARRAY[BYTE]: ``binary``)            ``array`` (``bytes``)
MAP(v)        ``map<string, v>``                               ``map``
RECORD(s)     ``struct<...>``                                  ``record`` (``avro.name``)
CHOICE(ts)    the members' common storage, see below          ``nifi.type=CHOICE``,
                                                               ``nifi.choice.members``; a union
============  ===============================================  ===================================

**Choice.** Arrow's unions are poorly supported by the engines that read records (DuckDB, the
text writers), so a CHOICE column holds one type all its members fit in: the widest integer when
every member is an integer, ``float64`` when every member is a number (a decimal when all are
decimals), a struct of every member's fields when every member is a record, else ``string`` (a
string member as it is, any other value as its JSON text: ``to_choice_storage``). The members
themselves (as Avro schemas) stay in the field's metadata, so the Avro writer writes the union.

**Nullability** is Arrow's: an Avro union with ``"null"`` is a nullable field; the Avro written
for a nullable field is ``["null", T]`` (``[T, "null"]`` when its default is not null).

**The Avro text** an Arrow schema came from stays in its metadata (``AVRO_SCHEMA_TEXT``):
``arrow_to_avro`` gives it back, exactly, while the schema still is the one it describes (as NiFi's
record schema keeps its text), so union order and everything Arrow does not hold survive; a
schema changed since (a field added) is converted field by field.

Named Avro types keep their full names (``avro.name``; the top record's in the schema metadata
under ``SCHEMA_NAME_KEY``), fixed types their size (``avro.fixed.size``), fields their default and
doc (``avro.default`` as JSON, ``avro.doc``). Recursive records cannot be Arrow types: they are a
``RecordError``.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Iterable, Sequence

import fastavro
import numpy as np
import orjson
import pyarrow as pa

from flowactors.sdk.records.api import SCHEMA_NAME_KEY, RecordError, SchemaMismatchError

NIFI_TYPE = b"nifi.type"
ENUM_SYMBOLS = b"nifi.enum.symbols"
CHOICE_MEMBERS = b"nifi.choice.members"
AVRO_NAME = b"avro.name"
AVRO_FIXED_SIZE = b"avro.fixed.size"
AVRO_DEFAULT = b"avro.default"
AVRO_DOC = b"avro.doc"
#: schema metadata: the Avro schema text the schema was made from
AVRO_SCHEMA_TEXT = b"avro.schema"

#: the record name and namespace NiFi gives a schema that has none
DEFAULT_RECORD_NAME, DEFAULT_NAMESPACE = "nifiRecord", "org.apache.nifi"
#: the largest Avro int (a fixed's size is one)
_INT_MAX = (1 << 31) - 1
#: BIGINT's Arrow type (NiFi's BigInteger): 38 decimal digits
BIGINT = pa.decimal128(38, 0)

_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
    "double": pa.float64(), "bytes": pa.binary(), "string": pa.string()}
_LOGICAL: dict[tuple[str, str], pa.DataType] = {
    ("int", "date"): pa.date32(), ("int", "time-millis"): pa.time32("ms"), ("long", "time-micros"): pa.time64("us"),
    ("long", "timestamp-millis"): pa.timestamp("ms", tz="UTC"),
    ("long", "timestamp-micros"): pa.timestamp("us", tz="UTC"),
    ("long", "local-timestamp-millis"): pa.timestamp("ms"), ("long", "local-timestamp-micros"): pa.timestamp("us")}
_NAMED = ("record", "enum", "fixed")
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: how deep Avro types may nest in a schema (a record's field's array's items ... count one each)
MAX_TYPE_DEPTH = 200
#: the characters a message shows escaped: the controls but tab, and every line boundary of ``str.splitlines``
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:   # a lone surrogate ("\\ud800" in JSON)
        return False
    return True


def printable(text: str, most: int | None = None) -> str:
    """``text`` as a one-line message quotes it (a name, a value from the content): control
    characters (tab aside) and line breaks escaped as Python writes them (``\\n``, ``\\x85``), and
    cut to ``most`` characters, ending in ``...``, when longer."""
    shown = _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    return shown if most is None or len(shown) <= most else shown[:most] + "..."


def _meta(field: pa.Field) -> dict[bytes, bytes]:
    return dict(field.metadata or {})


# ---------------------------------------------------------------------------------- Avro -> Arrow
def avro_to_arrow(avro: str | dict, *, strict: bool = True) -> pa.Schema:
    """The Arrow schema of an Avro record schema (JSON text, or parsed). The record's full name
    goes in the metadata under ``SCHEMA_NAME_KEY``. Text that is not JSON, or not a valid Avro
    record schema, raises ``RecordError`` with a one-line message saying what and where.
    ``strict``: names and namespaces must be Avro's (``[A-Za-z_][A-Za-z0-9_]*``) and defaults
    must fit their fields' types (NiFi's "Validate Schemas"); else any name is taken and
    defaults are not checked. A field name given twice is an error either way."""
    text = avro.decode() if isinstance(avro, bytes) else avro if isinstance(avro, str) else None
    if text is not None:
        try:
            avro = json.loads(text)
        except ValueError as err:
            where = f" at line {err.lineno}, column {err.colno}" if isinstance(err, json.JSONDecodeError) else ""
            reason = err.msg if isinstance(err, json.JSONDecodeError) else str(err)
            raise RecordError(f"the Avro schema is not JSON{where}: {reason}") from None
        except RecursionError:   # Python's parser nests as deep as its stack
            raise RecordError("the Avro schema's JSON nests too deeply to be read") from None
    if not isinstance(avro, dict) or avro.get("type") != "record":
        shown = avro.get("type") if isinstance(avro, dict) else avro
        raise RecordError(f"the Avro schema must be a record, not {json.dumps(shown)[:80]}")
    converter = _AvroToArrow(strict)
    struct_type, _, meta = converter.convert(avro, "", "")
    if strict:
        try:
            fastavro.parse_schema(avro, _write_hint=False)
        except Exception as err:   # fastavro's SchemaParseException, UnknownType, ...
            raise RecordError(f"the Avro schema is not valid: {err}") from None
    text = text if text is not None else json.dumps(avro, separators=(",", ":"))
    return pa.schema(list(struct_type), metadata={SCHEMA_NAME_KEY: meta[AVRO_NAME], AVRO_SCHEMA_TEXT: text.encode()})


@functools.lru_cache(maxsize=256)
def _fields_of_text(text: bytes) -> pa.Schema:
    return pa.schema(list(avro_to_arrow(text.decode(), strict=False)))


class _AvroToArrow:
    """One schema's conversion: the named types defined so far (full name -> definition)."""

    def __init__(self, strict: bool = True) -> None:
        self.names: dict[str, tuple[dict, str]] = {}
        self.open: list[str] = []
        self.strict = strict
        self.depth = 0

    def valid_name(self, name: Any, dotted: bool = False) -> bool:
        """Whether ``name`` may name a type or field: text (UTF-8: no lone surrogates); strictly
        also an Avro name (dotted: names separated by dots)."""
        if not isinstance(name, str) or not name or not _utf8(name):
            return False
        return not self.strict or all(_AVRO_NAME.fullmatch(p) for p in (name.split(".") if dotted else [name]))

    def convert(self, avro: Any, path: str, namespace: str) -> tuple[pa.DataType, bool, dict[bytes, bytes]]:
        """(Arrow type, nullable, field metadata) of an Avro type found at ``path``; types nested
        deeper than ``MAX_TYPE_DEPTH`` are an error."""
        if self.depth >= MAX_TYPE_DEPTH:
            raise self.error(path, f"types nest more than {MAX_TYPE_DEPTH} deep")
        self.depth += 1
        try:
            return self._convert(avro, path, namespace)
        finally:
            self.depth -= 1

    def _convert(self, avro: Any, path: str, namespace: str) -> tuple[pa.DataType, bool, dict[bytes, bytes]]:
        if isinstance(avro, list):
            return self._union(avro, path, namespace)
        if isinstance(avro, str):
            if avro in _PRIMITIVES:
                return _PRIMITIVES[avro], avro == "null", {}
            return self._reference(avro, path, namespace)
        if not isinstance(avro, dict) or "type" not in avro:
            raise self.error(path, f"{json.dumps(avro)[:80]} is not an Avro type")
        kind = avro["type"]
        if kind in _NAMED:
            return self._named(avro, path, namespace)
        if kind == "array":
            return self._array(avro, path, namespace)
        if kind == "map":
            value, nullable, meta = self.convert(self._required(avro, "values", path), f"{path}<value>", namespace)
            return pa.map_(pa.string(), pa.field("value", value, nullable, meta)), False, {}
        if not isinstance(kind, str) or kind not in _PRIMITIVES:
            if isinstance(kind, (dict, list)):
                return self.convert(kind, path, namespace)
            raise self.error(path, f"unknown type {json.dumps(kind)[:80]}")
        return self._logical(avro, kind, path), kind == "null", self._logical_meta(avro, kind)

    @staticmethod
    def error(path: str, problem: str) -> RecordError:
        return RecordError(f"the Avro schema is not valid at {_shown_path(path) or 'its top'}: {problem}")

    def _required(self, avro: dict, key: str, path: str) -> Any:
        if key not in avro:
            raise self.error(path, f"an Avro {avro['type']} needs '{key}'")
        return avro[key]

    def _union(self, members: list, path: str, namespace: str) -> tuple[pa.DataType, bool, dict[bytes, bytes]]:
        others = [m for m in members if m != "null"]
        nullable = len(others) < len(members)
        if not others:
            return pa.null(), True, {}
        if len(others) == 1:   # nullable when the member is itself (a union holding "null", the null type)
            data_type, member_nullable, meta = self.convert(others[0], path, namespace)
            return data_type, nullable or member_nullable, meta
        fields = [pa.field("member", *self.convert(m, f"{path}<{i}>", namespace)) for i, m in enumerate(others)]
        return choice_field("member", fields, nullable).type, nullable, _meta(choice_field("member", fields))

    def _reference(self, name: str, path: str, namespace: str) -> tuple[pa.DataType, bool, dict[bytes, bytes]]:
        full = name if "." in name or not namespace else f"{namespace}.{name}"
        if full not in self.names and name in self.names:
            full = name
        if full in self.open:
            raise RecordError(f"the Avro schema's record '{printable(full, 80)}' contains itself (at "
                              f"{_shown_path(path)}); a recursive record cannot be an Arrow schema")
        if full not in self.names:
            known = [printable(n, 40) for n in list(self.names)[:10]] + (["..."] if len(self.names) > 10 else [])
            raise self.error(path, f"unknown type '{printable(name, 80)}' (named types defined before it: "
                                   f"{', '.join(known) or 'none'})")
        definition, outer = self.names[full]
        return self._named(definition, path, outer, defining=False)

    def _named(self, avro: dict, path: str, namespace: str, defining: bool = True
               ) -> tuple[pa.DataType, bool, dict[bytes, bytes]]:
        name = avro.get("name")
        if not self.valid_name(name, dotted=True):
            raise self.error(path, f"a {avro['type']} needs a valid 'name', not {json.dumps(name)[:80]}")
        space = avro.get("namespace") if "." not in name and isinstance(avro.get("namespace"), str) else namespace
        if space and not self.valid_name(space, dotted=True):
            raise self.error(path, f"the namespace {json.dumps(space)[:80]} is not valid (names separated by '.')")
        full = name if "." in name or not space else f"{space}.{name}"
        if defining:
            if full in self.names:
                raise self.error(path, f"the name '{printable(full, 80)}' is defined twice")
            self.names[full] = (avro, namespace)
        meta = {AVRO_NAME: full.encode()}
        if avro["type"] == "enum":
            symbols = self._required(avro, "symbols", path)
            if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
                raise self.error(path, "an enum's 'symbols' must be a list of strings")
            return pa.string(), False, {NIFI_TYPE: b"ENUM", ENUM_SYMBOLS: json.dumps(symbols).encode(), **meta}
        if avro["type"] == "fixed":
            size = self._required(avro, "size", path)
            if type(size) is not int or not 0 <= size <= _INT_MAX:
                raise self.error(path, f"a fixed's 'size' must be a whole number from 0 to {_INT_MAX}, not "
                                       f"{json.dumps(size)[:80]}")
            meta[AVRO_FIXED_SIZE] = str(size).encode()
            decimal = self._decimal(avro, path) if avro.get("logicalType") == "decimal" else None
            return decimal or pa.binary(size), False, meta
        return self._record(avro, full, path, meta)

    def _record(self, avro: dict, full: str, path: str, meta: dict) -> tuple[pa.DataType, bool, dict[bytes, bytes]]:
        fields = self._required(avro, "fields", path)
        if not isinstance(fields, list):
            raise self.error(path, "a record's 'fields' must be a list")
        space = full.rpartition(".")[0]
        self.open.append(full)
        arrow_fields, seen = [], set()
        for index, field in enumerate(fields):
            name = field.get("name") if isinstance(field, dict) else None
            if not self.valid_name(name):
                raise self.error(path, f"field {index} needs a valid 'name', not {json.dumps(name)[:80]}")
            if name in seen:
                raise self.error(path, f"the field name '{printable(name, 80)}' is used twice")
            seen.add(name)
            where = f"{path}.{name}" if path else name
            if "type" not in field:
                raise self.error(where, "a field needs a 'type'")
            data_type, nullable, field_meta = self.convert(field["type"], where, space)
            if "default" in field:
                field_meta[AVRO_DEFAULT] = json.dumps(field["default"]).encode()
            if isinstance(field.get("doc"), str):
                field_meta[AVRO_DOC] = field["doc"].encode(errors="replace")
            arrow_fields.append(pa.field(name, data_type, nullable, field_meta or None))
        self.open.pop()
        return pa.struct(arrow_fields), False, meta

    def _array(self, avro: dict, path: str, namespace: str) -> tuple[pa.DataType, bool, dict[bytes, bytes]]:
        item, nullable, meta = self.convert(self._required(avro, "items", path), f"{path}[]", namespace)
        return pa.list_(pa.field("item", item, nullable, meta or None)), False, {}

    def _logical(self, avro: dict, kind: str, path: str) -> pa.DataType:
        logical = avro.get("logicalType")
        if logical == "decimal" and kind == "bytes":
            return self._decimal(avro, path)
        return _LOGICAL.get((kind, logical), _PRIMITIVES[kind]) if isinstance(logical, str) else _PRIMITIVES[kind]

    @staticmethod
    def _logical_meta(avro: dict, kind: str) -> dict[bytes, bytes]:
        return {NIFI_TYPE: b"UUID"} if kind == "string" and avro.get("logicalType") == "uuid" else {}

    def _decimal(self, avro: dict, path: str) -> pa.DataType:
        precision, scale = avro.get("precision"), avro.get("scale", 0)
        if type(precision) is not int or type(scale) is not int or not 0 <= scale <= precision or precision < 1:
            raise self.error(path, f"a decimal needs 0 <= scale <= precision and a precision of 1 or more "
                                   f"(precision {json.dumps(precision)[:40]}, scale {json.dumps(scale)[:40]})")
        if precision > 76:
            raise self.error(path, f"a decimal of precision {precision} is past Arrow's 76 digits")
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)


# ---------------------------------------------------------------------------------- Arrow -> Avro
def arrow_to_avro(schema: pa.Schema, name: str | None = None) -> dict:
    """The Avro record schema (parsed JSON) of an Arrow schema: named ``name``, else the schema's
    own name (``SCHEMA_NAME_KEY``), else NiFi's ``org.apache.nifi.nifiRecord``. Field names Avro
    does not allow are changed as NiFi changes them (``_`` for each other character), the
    original kept as an alias. Raises ``RecordError`` for a type Avro cannot hold."""
    text = (schema.metadata or {}).get(AVRO_SCHEMA_TEXT)
    if text is not None and _fields_of_text(text).equals(pa.schema(list(schema)), check_metadata=True):
        avro = json.loads(text)
        if name:
            space, _, short = name.rpartition(".")
            avro.update(name=short, **({"namespace": space} if space else {}))
        return avro
    full = name or (schema.metadata or {}).get(SCHEMA_NAME_KEY, b"").decode() or \
        f"{DEFAULT_NAMESPACE}.{DEFAULT_RECORD_NAME}"
    return _ArrowToAvro().record(list(schema), full, "")


def avro_text(schema: pa.Schema, name: str | None = None) -> str:
    """``arrow_to_avro`` as compact JSON text (what NiFi's writers put in ``avro.schema``)."""
    return json.dumps(arrow_to_avro(schema, name), separators=(",", ":"))


def avro_field_name(name: str) -> str:
    """A field name as Avro allows it (NiFi's rule: ``_`` for each character it does not)."""
    if not name:
        return "UNNAMED_FIELD"
    fixed = "".join(c if c == "_" or c.isalnum() else "_" for c in name)
    return fixed if fixed[0] == "_" or fixed[0].isalpha() else "_" + fixed[1:]


class _ArrowToAvro:
    """One schema's conversion: the named types written so far (full name -> definition)."""

    def __init__(self) -> None:
        self.defined: dict[str, dict] = {}

    def record(self, fields: Sequence[pa.Field], full: str, prefix: str) -> Any:
        space, _, short = full.rpartition(".")
        avro_fields, used = [], set()
        for field in fields:
            avro_name = avro_field_name(field.name)
            while avro_name in used:
                avro_name += "_"
            used.add(avro_name)
            entry: dict[str, Any] = {"name": avro_name, "type": self.field_type(field, f"{prefix}{field.name}")}
            if avro_name != field.name:
                entry["aliases"] = [field.name]
            meta = _meta(field)
            if AVRO_DOC in meta:
                entry["doc"] = meta[AVRO_DOC].decode()
            if AVRO_DEFAULT in meta:
                entry["default"] = json.loads(meta[AVRO_DEFAULT])
            avro_fields.append(entry)
        definition = {"type": "record", "name": short, **({"namespace": space} if space else {}),
                      "fields": avro_fields}
        return self.define(definition)

    def field_type(self, field: pa.Field, path: str) -> Any:
        """The Avro type of ``field``, a union with null when it is nullable."""
        avro = self.value_type(field, path)
        if not field.nullable or avro == "null":
            return avro
        members = [m for m in (avro if isinstance(avro, list) else [avro]) if m != "null"]
        default = _meta(field).get(AVRO_DEFAULT)
        return [*members, "null"] if default is not None and json.loads(default) is not None else ["null", *members]

    def value_type(self, field: pa.Field, path: str) -> Any:
        meta, data_type = _meta(field), field.type
        nifi = meta.get(NIFI_TYPE)
        if nifi == b"CHOICE":
            return [self.adopt(m) for m in json.loads(meta[CHOICE_MEMBERS])]
        if nifi == b"ENUM":
            name = meta.get(AVRO_NAME, f"{DEFAULT_NAMESPACE}.{field.name}".encode()).decode()
            space, _, short = name.rpartition(".")
            return self.define({"type": "enum", "name": short, **({"namespace": space} if space else {}),
                                "symbols": json.loads(meta[ENUM_SYMBOLS])})
        if nifi == b"UUID":
            return {"type": "string", "logicalType": "uuid"}
        if nifi in (b"CHAR", b"BIGINT"):
            return "string"
        if pa.types.is_dictionary(data_type):
            return self.value_type(field.with_type(data_type.value_type), path)
        if pa.types.is_struct(data_type):
            name = meta.get(AVRO_NAME, f"{DEFAULT_NAMESPACE}.{path.replace('.', '_')}Type".encode()).decode()
            return self.record(list(data_type), name, path + ".")
        if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type) \
                or pa.types.is_list_view(data_type) or pa.types.is_large_list_view(data_type):
            return {"type": "array", "items": self.field_type(data_type.value_field, path)}
        if pa.types.is_map(data_type):
            return {"type": "map", "values": self.field_type(data_type.item_field, path)}
        return self.scalar_type(field, path)

    def scalar_type(self, field: pa.Field, path: str) -> Any:
        meta, t = _meta(field), field.type
        if pa.types.is_decimal(t):
            decimal = {"logicalType": "decimal", "precision": t.precision, "scale": t.scale}
            if AVRO_FIXED_SIZE in meta:
                return self.fixed(meta, path, decimal)
            return {"type": "bytes", **decimal}
        if pa.types.is_fixed_size_binary(t):
            return self.fixed({**meta, AVRO_FIXED_SIZE: str(t.byte_width).encode()}, path, {})
        if pa.types.is_timestamp(t):
            unit = "millis" if t.unit in ("s", "ms") else "micros"
            return {"type": "long", "logicalType": f"timestamp-{unit}" if t.tz else f"local-timestamp-{unit}"}
        if pa.types.is_time32(t):
            return {"type": "int", "logicalType": "time-millis"}
        if pa.types.is_time64(t):
            return {"type": "long", "logicalType": "time-micros"}
        if pa.types.is_date(t):
            return {"type": "int", "logicalType": "date"}
        for test, avro in _SCALARS:
            if test(t):
                return avro
        raise RecordError(f"field '{path}' is of Arrow type {t}, which Avro cannot hold")

    def fixed(self, meta: dict[bytes, bytes], path: str, logical: dict) -> Any:
        name = meta.get(AVRO_NAME, f"{DEFAULT_NAMESPACE}.{path.replace('.', '_')}Fixed".encode()).decode()
        space, _, short = name.rpartition(".")
        return self.define({"type": "fixed", "name": short, **({"namespace": space} if space else {}),
                            "size": int(meta[AVRO_FIXED_SIZE]), **logical})

    def define(self, definition: dict) -> Any:
        """A named type's definition the first time its name is written, its name after (a
        different type of the same name is renamed with a numeric suffix)."""
        space = definition.get("namespace")
        full = f"{space}.{definition['name']}" if space else definition["name"]
        number = 1
        while full in self.defined and self.defined[full] != definition:
            number += 1
            renamed = f"{definition['name'].rstrip('0123456789')}{number}"
            if self.defined[full].get("name") != renamed:
                definition = {**definition, "name": renamed}
            full = f"{space}.{definition['name']}" if space else definition["name"]
        if full in self.defined:
            return full
        self.defined[full] = definition
        return definition

    def adopt(self, avro: Any) -> Any:
        """A self-contained Avro type (a choice member) with each named type in it defined once."""
        if isinstance(avro, list):
            return [self.adopt(m) for m in avro]
        if not isinstance(avro, dict):
            return avro
        if avro.get("type") == "record":
            return self.define({**avro, "fields": [{**f, "type": self.adopt(f["type"])} for f in avro["fields"]]})
        if avro.get("type") in _NAMED:
            return self.define(avro)
        if avro.get("type") == "array":
            return {**avro, "items": self.adopt(avro["items"])}
        if avro.get("type") == "map":
            return {**avro, "values": self.adopt(avro["values"])}
        return avro


_SCALARS: tuple = (
    (pa.types.is_null, "null"), (pa.types.is_boolean, "boolean"),
    (lambda t: t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()), "int"),
    (pa.types.is_integer, "long"), (lambda t: t in (pa.float16(), pa.float32()), "float"),
    (pa.types.is_float64, "double"),
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t), "string"),
    (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t), "bytes"))


# ---------------------------------------------------------------------------------- NiFi's names
def nifi_type_name(field: pa.Field) -> str:
    """NiFi's name of the field's type, as NiFi prints it (``INT``, ``DECIMAL[10,2]``,
    ``ARRAY[STRING]``, ``MAP<LONG>``, ``RECORD``, ``CHOICE[INT, STRING]``, ``ENUM[a, b]``)."""
    meta, t = _meta(field), field.type
    nifi = meta.get(NIFI_TYPE)
    if nifi == b"ENUM":
        return f"ENUM[{', '.join(json.loads(meta[ENUM_SYMBOLS]))}]"
    if nifi == b"CHOICE":
        members = [_member_field(m) for m in json.loads(meta[CHOICE_MEMBERS])]
        return f"CHOICE[{', '.join(nifi_type_name(m) for m in members)}]"
    if nifi is not None:
        return nifi.decode()
    if pa.types.is_dictionary(t):
        return nifi_type_name(field.with_type(t.value_type))
    if pa.types.is_decimal(t):
        return f"DECIMAL[{t.precision},{t.scale}]"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) \
            or pa.types.is_binary_view(t):
        return "ARRAY[BYTE]"
    if pa.types.is_map(t):
        return f"MAP<{nifi_type_name(t.item_field)}>"
    if hasattr(t, "value_field"):
        return f"ARRAY[{nifi_type_name(t.value_field)}]"
    for test, name in _NIFI_NAMES:
        if test(t):
            return name
    return str(t).upper()


_NIFI_NAMES: tuple = (
    (pa.types.is_struct, "RECORD"), (pa.types.is_boolean, "BOOLEAN"), (lambda t: t == pa.int8(), "BYTE"),
    (lambda t: t in (pa.int16(), pa.uint8()), "SHORT"), (lambda t: t in (pa.int32(), pa.uint16()), "INT"),
    (pa.types.is_integer, "LONG"), (lambda t: t in (pa.float16(), pa.float32()), "FLOAT"),
    (pa.types.is_float64, "DOUBLE"), (pa.types.is_date, "DATE"), (pa.types.is_time, "TIME"),
    (pa.types.is_timestamp, "TIMESTAMP"),
    (lambda t: pa.types.is_null(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
     or pa.types.is_string_view(t), "STRING"))


# ---------------------------------------------------------------------------------- choice
def choice_field(name: str, members: Sequence[pa.Field | pa.DataType], nullable: bool = True) -> pa.Field:
    """A CHOICE field of these member types: its Arrow type is their common storage (see the
    module docstring), its metadata the members as Avro schemas."""
    fields = [m if isinstance(m, pa.Field) else pa.field(name, m) for m in members]
    avro = [_ArrowToAvro().value_type(f.with_nullable(False), f.name) for f in fields]
    meta = {NIFI_TYPE: b"CHOICE", CHOICE_MEMBERS: json.dumps(avro).encode()}
    return pa.field(name, choice_storage([f.type for f in fields]), nullable, meta)


def choice_storage(types: Sequence[pa.DataType]) -> pa.DataType:
    """The one Arrow type a CHOICE of ``types`` is held in (see the module docstring)."""
    if all(pa.types.is_integer(t) for t in types):
        return max(types, key=lambda t: t.bit_width if pa.types.is_signed_integer(t) else t.bit_width * 2)
    if all(pa.types.is_decimal(t) for t in types):
        return _merge_decimals(types)
    if all(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) for t in types):
        return pa.float64()
    if all(pa.types.is_struct(t) for t in types):
        merged = pa.schema([])
        for t in types:
            merged = merge_schemas(merged, pa.schema(list(t)))
        return pa.struct([f.with_nullable(True) for f in merged])
    return pa.string()


def _merge_decimals(types: Iterable[pa.DataType]) -> pa.DataType:
    types = list(types)
    scale = max(t.scale for t in types)
    precision = max(t.precision - t.scale for t in types) + scale
    return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(min(precision, 76), scale)


def _member_field(avro: Any) -> pa.Field:
    data_type, nullable, meta = _AvroToArrow().convert(avro, "", "")
    return pa.field("member", data_type, nullable, meta or None)


def to_choice_storage(values: list, data_type: pa.DataType) -> list:
    """``values`` of a CHOICE column made to fit its storage type ``data_type``: for ``string``,
    each value that is not a string as its JSON text; struct values have their fields made to
    fit, recursively; numbers stay as they are (Arrow widens them)."""
    if pa.types.is_string(data_type):
        return [v if v is None or isinstance(v, str) else orjson.dumps(v, default=str).decode() for v in values]
    if pa.types.is_struct(data_type):
        names = [f.name for f in data_type]
        columns = {f.name: to_choice_storage([None if v is None else v.get(f.name) for v in values], f.type)
                   for f in data_type}
        return [None if v is None else {n: columns[n][i] for n in names} for i, v in enumerate(values)]
    return values


# ---------------------------------------------------------------------------------- merging
_INT_ORDER = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]


def merge_schemas(a: pa.Schema, b: pa.Schema) -> pa.Schema:
    """One schema both ``a``'s and ``b``'s records fit (inference across batches): ``a``'s fields
    in order with types widened (int -> long -> double, anything with a string: string, structs
    merged field by field, other mixes a CHOICE), then ``b``'s new fields, nullable."""
    others = {f.name: f for f in b}
    fields = [_merge_fields(f, others[f.name]) if f.name in others else f for f in a]
    known = set(a.names)
    fields += [f.with_nullable(True) for f in b if f.name not in known]
    return pa.schema(fields, metadata=a.metadata or b.metadata)


def _merge_fields(a: pa.Field, b: pa.Field) -> pa.Field:
    nullable = a.nullable or b.nullable or pa.types.is_null(a.type) or pa.types.is_null(b.type)
    if a.type == b.type and _meta(a).get(NIFI_TYPE) == _meta(b).get(NIFI_TYPE):
        return a.with_nullable(nullable)
    choice = b"CHOICE" in (_meta(a).get(NIFI_TYPE), _meta(b).get(NIFI_TYPE))
    merged = None if choice else merge_types(a.type, b.type)
    if merged is not None:
        keep = a if not pa.types.is_null(a.type) else b
        meta = _meta(keep) if merged == keep.type else {k: v for k, v in _meta(keep).items() if k.startswith(b"avro.")}
        return pa.field(a.name, merged, nullable, meta or None)
    members = _choice_members(a) + _choice_members(b)
    unique = list({json.dumps(_ArrowToAvro().value_type(m.with_nullable(False), m.name)): m for m in members}.values())
    return choice_field(a.name, unique, nullable)


def _choice_members(field: pa.Field) -> list[pa.Field]:
    meta = _meta(field)
    if meta.get(NIFI_TYPE) == b"CHOICE":
        return [_member_field(m).with_name(field.name) for m in json.loads(meta[CHOICE_MEMBERS])]
    return [field.with_nullable(False)]


def merge_types(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type both fit in by widening, or None when they need a CHOICE."""
    if a == b or pa.types.is_null(b):
        return a
    if pa.types.is_null(a):
        return b
    if _is_text(a) or _is_text(b):
        return pa.string()
    numeric = [pa.types.is_integer(a) or pa.types.is_floating(a) or pa.types.is_decimal(a),
               pa.types.is_integer(b) or pa.types.is_floating(b) or pa.types.is_decimal(b)]
    if all(numeric):
        return _merge_numbers(a, b)
    if pa.types.is_temporal(a) and pa.types.is_temporal(b):
        return _merge_temporal(a, b)
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return pa.struct(list(merge_schemas(pa.schema(list(a)), pa.schema(list(b)))))
    if pa.types.is_list(a) and pa.types.is_list(b):
        return pa.list_(_merge_fields(a.value_field, b.value_field))
    if pa.types.is_map(a) and pa.types.is_map(b) and a.key_type == b.key_type:
        return pa.map_(a.key_type, _merge_fields(a.item_field, b.item_field))
    return None


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _merge_numbers(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    if pa.types.is_integer(a) and pa.types.is_integer(b):
        # an unsigned integer fits the signed one twice its width (up to long)
        signed = [t if pa.types.is_signed_integer(t) else _INT_ORDER[{8: 1, 16: 2}.get(t.bit_width, 3)]
                  for t in (a, b)]
        return max(signed, key=_INT_ORDER.index)
    if pa.types.is_decimal(a) and pa.types.is_decimal(b):
        return _merge_decimals([a, b])
    if pa.types.is_decimal(a) or pa.types.is_decimal(b):
        decimal, other = (a, b) if pa.types.is_decimal(a) else (b, a)
        if pa.types.is_integer(other):
            return _merge_decimals([decimal, pa.decimal128(19, 0)])
        return pa.float64()
    if a == pa.float32() and b == pa.float32():
        return a
    return pa.float64()


def _merge_temporal(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        unit = max(a.unit, b.unit, key=["s", "ms", "us", "ns"].index)   # the finer
        return pa.timestamp(unit, tz=a.tz or b.tz)
    if pa.types.is_date(a) and pa.types.is_timestamp(b):
        return b
    if pa.types.is_timestamp(a) and pa.types.is_date(b):
        return a
    if pa.types.is_time(a) and pa.types.is_time(b):
        return pa.time64("us") if "us" in (a.unit, b.unit) or "ns" in (a.unit, b.unit) else a
    return None


# ---------------------------------------------------------------------------------- conforming
def conform(records: pa.RecordBatch | pa.Table, schema: pa.Schema) -> pa.RecordBatch | pa.Table:
    """``records`` cast to ``schema``: its fields in its order and types (a field the records lack
    is null, one the schema lacks is dropped; structs are matched by field name, recursively).
    A value that does not fit its type, or a null where the schema allows none, raises
    ``SchemaMismatchError`` naming the field, the record and the value."""
    if isinstance(records, pa.Table):
        return pa.Table.from_batches([conform(b, schema) for b in records.to_batches()], schema=schema)
    names = set(records.schema.names)
    columns = [_cast(records.column(f.name), f, f.name, True) if f.name in names
               else pa.nulls(records.num_rows, f.type) for f in schema]
    batch = pa.RecordBatch.from_arrays(columns, schema=schema)
    _check_nulls(batch, schema)
    return batch


def _cast(array: pa.Array, field: pa.Field, path: str, records: bool) -> pa.Array:
    """``array`` as ``field``'s type; ``path`` names the field, ``records`` says whether the
    array's rows are the records (else values inside lists), for the message of a mismatch."""
    target = field.type
    if array.type == target:
        return array
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(array.type) and pa.types.is_struct(target):   # by name: missing fields null
        present = {f.name for f in array.type}
        children = [_cast(array.field(f.name), f, f"{path}.{f.name}", records) if f.name in present else pa.nulls(len(array), f.type)
                    for f in target]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_list(array.type) and pa.types.is_list(target):
        return pa.ListArray.from_arrays(array.offsets, _cast(array.values, target.value_field, f"{path}[]", False),
                                        type=target,
                                        mask=mask)
    try:
        return array.cast(field.type)
    except pa.ArrowNotImplementedError:
        if _is_text(field.type):   # a struct, list or map into a string: its JSON text, as a choice holds it
            return pa.array(to_choice_storage(array.to_pylist(), pa.string()), field.type)
        raise SchemaMismatchError(f"field '{_shown_path(path)}' is {_shown_type(pa.field(field.name, array.type))}, "
                                  f"which cannot become {_shown_type(field)}") from None
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        if pa.types.is_timestamp(array.type) and pa.types.is_timestamp(field.type):
            return array.cast(field.type, safe=False)   # a finer timestamp truncated, as NiFi's
        raise _mismatch(array, field, err, path, records) from None


def _mismatch(array: pa.Array, field: pa.Field, err: Exception, path: str, records: bool) -> SchemaMismatchError:
    """The error naming the first value of ``array`` that cannot be cast (found by halving)."""
    low, high = 0, len(array)
    while high - low > 1:
        middle = (low + high) // 2
        try:
            array.slice(low, middle - low).cast(field.type)
            low = middle
        except pa.ArrowException:
            high = middle
    found = array[low].as_py()
    value = repr(found) if isinstance(found, bytes) else json.dumps(found, default=str)
    value = value if len(value) <= 80 else value[:77] + "..."
    reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    where = f"record {low}" if records else f"nested value {low}"
    return SchemaMismatchError(f"field '{_shown_path(path)}' of {where} is {value}, which does not fit "
                               f"{_shown_type(field)} ({printable(reason, 200)})")


def _check_nulls(batch: pa.RecordBatch, schema: pa.Schema) -> None:
    for column, field in zip(batch.columns, schema):
        found = _null_rows(column, field, field.name)
        if found is not None:
            rows, path, inner = found
            raise SchemaMismatchError(f"field '{_shown_path(path)}' of record {int(np.argmax(rows))} is null, but the "
                                      f"schema does not allow null there ({_shown_type(inner)})")


def _shown_path(path: str) -> str:
    """A field's path for a message: printable, its end when long."""
    return printable(path) if len(path) <= 120 else "..." + printable(path[-120:])


def _shown_type(field: pa.Field) -> str:
    """A field's NiFi type for a message: printable (an enum's symbols), its start when long."""
    return printable(nifi_type_name(field), 160)


def _null_rows(array: pa.Array, field: pa.Field, path: str) -> tuple[np.ndarray, str, pa.Field] | None:
    """(which rows of ``array`` hold a null where ``field``, or a field inside it, allows none,
    the path of that field, the field), or None when none does."""
    if not field.nullable and array.null_count:
        return np.asarray(array.is_null()), path, field
    data_type = array.type
    if pa.types.is_struct(data_type):
        for index, child in enumerate(data_type):
            found = _null_rows(array.field(index), child, f"{path}.{child.name}")
            if found is not None:
                rows = found[0] & np.asarray(array.is_valid()) if array.null_count else found[0]
                if rows.any():
                    return rows, found[1], found[2]
        return None
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_map(data_type):
        inner = (array.items, data_type.item_field) if pa.types.is_map(data_type) else \
            (array.values, data_type.value_field)
        found = _null_rows(inner[0], inner[1], f"{path}[]")
        if found is None:
            return None
        offsets = np.asarray(array.offsets)
        counts = np.concatenate([[0], np.cumsum(found[0])])
        rows = counts[offsets[1:]] - counts[offsets[:-1]] > 0
        return (rows & np.asarray(array.is_valid()), found[1], found[2]) if rows.any() else None
    return None
