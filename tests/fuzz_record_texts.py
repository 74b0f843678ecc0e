"""The fuzz targets of the record texts that are not contents (tests/fuzz_records.py says what is
checked): Avro schema text (``avro_to_arrow``, strict and not, then written back by
``arrow_to_avro``; the AvroSchemaRegistry holding it; a reader given it as its Schema Text),
RecordPath text (``compile_path``, then the path evaluated on NiFi's example record, with its
schema and without), and the CSV files of the lookup services (SimpleCsvFileLookupService,
CSVRecordLookupService, in every CSV format they take).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.fuzz_formats import Finding, Format, expect
from tests.fuzz_mutations import damaged, json_documents
from tests.fuzz_records import (ACCOUNT_SCHEMA, CSV_TABLES, NESTED_SCHEMA, PERSON_SCHEMA, WRAPPER_SCHEMA,
                                clear_message, documented, write_csv)
from tests.fuzz_records_binary import LOGICAL_SCHEMA, RECURSIVE_SCHEMA, STRUCTURES_SCHEMA

# --- Avro schema text (flowactors/sdk/records/schema.py, services/records/registry.py) ---------------

_DEFAULTS = {"type": "record", "name": "defaults", "namespace": "a.b", "doc": "every default", "aliases": ["d"],
             "fields": [
                 {"name": "i", "type": "int", "default": 1}, {"name": "l", "type": "long", "default": -1},
                 {"name": "f", "type": "float", "default": 1.5}, {"name": "s", "type": "string", "default": "x"},
                 {"name": "b", "type": "bytes", "default": "\u00ff"}, {"name": "n", "type": ["null", "int"],
                                                                         "default": None},
                 {"name": "u", "type": ["string", "null"], "default": "s"},
                 {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"], "default": "X"},
                  "default": "Y"},
                 {"name": "a", "type": {"type": "array", "items": "E"}, "default": ["X"]},
                 {"name": "m", "type": {"type": "map", "values": "double"}, "default": {"k": 1}},
                 {"name": "r", "type": {"type": "record", "name": "R", "fields": [{"name": "x", "type": "E"}]},
                  "default": {"x": "X"}, "doc": "a record", "order": "descending"},
                 {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 2}, "default": "ab"},
                 {"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}, "default": 0},
                 {"name": "unknown", "type": {"type": "string", "logicalType": "nope"}}]}
AVRO_SCHEMAS = [ACCOUNT_SCHEMA, NESTED_SCHEMA, WRAPPER_SCHEMA, PERSON_SCHEMA, LOGICAL_SCHEMA, STRUCTURES_SCHEMA,
                RECURSIVE_SCHEMA, _DEFAULTS]


def _schema_seeds(folder) -> tuple[list, list[bytes]]:
    return AVRO_SCHEMAS, [json.dumps(s, indent=i).encode() for s in AVRO_SCHEMAS for i in (None, 2)]


def deep_schema(depth: int, kind: str) -> bytes:
    """A record whose one field's type nests ``depth`` arrays, maps, unions or records."""
    opening, closing = {"array": ('{"type":"array","items":', "}"), "map": ('{"type":"map","values":', "}"),
                        "union": ('["null",', "]"),
                        "record": ('{"type":"record","name":"r%d","fields":[{"name":"f","type":', "}]}")}[kind]
    inner = "".join(opening.replace("%d", str(i)) for i in range(depth)) + '"int"' + closing * depth
    return ('{"type":"record","name":"top","fields":[{"name":"deep","type":%s}]}' % inner).encode()


def _schema_examples(seeds: tuple[list, list[bytes]]) -> st.SearchStrategy[bytes]:
    deep = st.tuples(st.integers(1, 3000), st.sampled_from(("array", "map", "union", "record")))
    return st.one_of(json_documents(*seeds), deep.map(lambda d: deep_schema(*d)))


def _read_schema_text(folder, data: bytes) -> None:
    from flowactors.sdk.records import RecordError
    from flowactors.sdk.records.schema import arrow_to_avro, avro_text, avro_to_arrow

    text = data.decode("utf-8", "replace")
    for strict in (True, False):
        try:
            with documented((RecordError,), f"avro_to_arrow(strict={strict})"):
                schema = avro_to_arrow(text, strict=strict)
        except RecordError:
            continue
        avro_text(schema)
        with documented((RecordError,), "arrow_to_avro of a schema changed since its text"):
            try:
                arrow_to_avro(schema.remove_metadata())
            except RecordError:
                pass
    _registry_holding(text)
    _reader_given(text)


def _registry_holding(text: str) -> None:
    """An AvroSchemaRegistry holding ``text``: refused when the flow validates (one problem a
    line), or enabled, then handing the schema out named."""
    from flowactors.sdk.records import SCHEMA_NAME_KEY
    from flowactors.sdk.services import ServiceEnableError
    from flowactors.services.records.registry import AvroSchemaRegistry
    from flowactors.testing import enable_service

    for strategy in ("Validate Schemas", "Do Not Validate Schemas"):
        try:
            registry = enable_service(AvroSchemaRegistry, {"Validation Strategy": strategy, "fuzzed": text})
        except ServiceEnableError as err:
            raise Finding(f"AvroSchemaRegistry validated a schema it then could not enable: {err}",
                          f"registry enable: {type(err.__cause__).__name__}") from err
        except ValueError as err:
            expect(str(err).startswith("AvroSchemaRegistry is not valid: "), f"a ValueError {err}")
            clear_message(err, "AvroSchemaRegistry")
            continue
        schema = registry.retrieve_schema("fuzzed")
        expect(schema.metadata[SCHEMA_NAME_KEY] == b"fuzzed", f"the schema is named {schema.metadata}")


def _reader_given(text: str) -> None:
    """A JsonTreeReader given ``text`` as its Schema Text (an expression: ``${`` in it is one, and
    one that does not parse is refused when the flow validates, one problem a line)."""
    from flowactors.sdk.records import RecordError
    from flowactors.services.records.json import JsonTreeReader
    from tests.fuzz_records import read_records

    try:
        read_records(JsonTreeReader, {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": text},
                     b'[{"id": 1, "name": "x"}]')
    except RecordError:
        pass
    except ValueError as err:   # not a valid expression: refused when the flow validates, in one line
        expect(str(err).startswith("JsonTreeReader is not valid: "), f"a ValueError {err}")
        clear_message(err, "JsonTreeReader")


# --- RecordPath (flowactors/sdk/record_path/) ---------------------------------------------------------

RECORD_PATHS = [
    "/", "/name", "/mainAccount/balance", "./../mainAccount", "..", "/'full,name'", '/"a b"/c', "/mainAccount/*",
    "//id", "//*", "/accounts[0]/balance", "/accounts[-1]", "/accounts[0..-1]/id", "/numbers[0, 2..4, -1]",
    "/numbers[*]", "/attributes['city']", "/attributes['city', 'state']", "/attributes[*]",
    "/accounts[./balance > 100]/id", "/name[startsWith(., 'J')][not(. = 'x')]/.", "/id[count(/friends[*]) = 4]",
    "/*[fieldName(.) = 'bytes']", "substringBefore(/name, ' ')", "concat('Hello NiFi', ' ', 2)",
    "arrayOf( /accounts[*], recordOf('id', '5555', 'balance', '123.45') )", "mapOf('a', /friends[9])",
    "coalesce(/name, 'default', /firstName)", "format(/id, 'yyyy-MM-dd HH:mm', 'Asia/Tokyo')",
    "toDate(/date, \"yyyy-MM-dd'T'HH:mm:ss'Z'\", 'GMT')", "replaceRegex(/name, '(?<first>\\w+) (\\w+)', '${first}')",
    "matchesRegex(/name, 'J.*')", "/friends[containsRegex(., '^J[a-z]+$')]", "padLeft(/name, 10, '@')",
    "toBytes(/name, 'UTF-16')", "toString(/bytes, 'UTF-8')", "base64Encode(/name)", "hash(/name, 'SHA-256')",
    "uuid5(/name, 'a7f1d5a0-4d7b-4a0d-9f39-4c4d8a9b0a4f')", "unescapeJson(escapeJson(/), 'true', 'true')",
    "escapeJson(/attributes)", "divide(/id, 0)", "multiply(/floatNumber, 2)", "add(/longNumber, 9223372036854775807)",
    "subtract(/shortNumber, -1.5)", "toNumber('0x10')", "anchored(/accounts, concat(/id, '->', /balance))",
    "join(' ', /firstName, /friends[1..2], /lastName)", "replaceNull(/missing, 'x')", "fieldName(/mainAccount/*)",
    "/name = 'John Doe'", "/id > 4 and /id < 50", "isEmpty(/missing)", "substring(/name, -3, 100)",
    "trim(toUpperCase(/name))", "'\\u0041\\n\\t'", "-12.5e3", "/numbers[/id]",
]
_PATH_CHARS = "/.*[]()',\"=<>!&|$ \\-_0123456789abcdeflmnorstuxyzJN\u00e9\n\t"


@st.composite
def _path_mutated(draw: st.DrawFn) -> str:
    """A seed path with 1 to 4 changes: a character inserted, deleted, replaced or repeated, a
    piece of another path spliced in."""
    text = draw(st.sampled_from(RECORD_PATHS))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(("insert", "delete", "replace", "repeat", "splice")))
        char = draw(st.sampled_from(_PATH_CHARS) | st.characters())
        if kind == "insert":
            text = text[:at] + char + text[at:]
        elif kind == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 8)):]
        elif kind == "replace":
            text = text[:at] + char + text[at + 1:]
        elif kind == "repeat":
            text = text[:at] + text[at:at + draw(st.integers(1, 16))] * draw(st.integers(2, 50)) + text[at:]
        else:
            other = draw(st.sampled_from(RECORD_PATHS))
            start = draw(st.integers(0, len(other)))
            text = text[:at] + other[start:start + draw(st.integers(1, 20))] + text[at:]
    return text


#: what a path may nest in: (opening, closing)
_NESTS = (("concat(", ")"), ("/a[", "]"), ("not(", ")"), ("/a[not(", " = 1)]"), ("arrayOf(", ")"))


def _path_examples(seeds) -> st.SearchStrategy[str]:
    deep = st.tuples(st.sampled_from(_NESTS), st.integers(1, 2000)).map(
        lambda d: d[0][0] * d[1] + "/name" + d[0][1] * d[1])
    return st.one_of(st.sampled_from(RECORD_PATHS), _path_mutated(), st.text(_PATH_CHARS, max_size=40),
                     st.text(max_size=20), deep)


def _read_path(folder, text: str) -> None:
    from flowactors.sdk.record_path import RecordPathError, compile_path
    from tests.record_path_example import SCHEMA, example

    with documented((RecordPathError,), "compile_path"):
        path = compile_path(text)
    for schema in (SCHEMA, None):
        try:
            with documented((RecordPathError,), "RecordPath.evaluate"):
                selected = path.evaluate(example(), schema)
        except RecordPathError:
            continue
        for value in selected:
            expect(isinstance(value.name, (str, type(None))), f"a field name {value.name!r}")


# --- the lookup services' CSV files (flowactors/services/lookup.py) -----------------------------------

_LOOKUP_PROPERTIES = ("CSV Format", "Character Set", "Trim Fields", "Value Separator", "Quote Character",
                      "Escape Character", "Comment Marker")


@st.composite
def _lookup_examples(draw: st.DrawFn, seeds: list[bytes]) -> tuple[str, dict, bytes]:
    from flowactors.services.records.csv_formats import DEFAULT, RFC4180_COMPAT
    from tests.fuzz_records import csv_dialect, csv_table

    options = draw(csv_dialect())
    if draw(st.booleans()):
        options["CSV Format"] = draw(st.sampled_from((DEFAULT, RFC4180_COMPAT)))
    options = {k: v for k, v in options.items() if k in _LOOKUP_PROPERTIES}
    table = draw(st.sampled_from(CSV_TABLES) | csv_table())
    content = write_csv(table, options)
    content = draw(st.sampled_from((content,)) | damaged([content, *seeds]))
    names = [n.strip() for n in table[0]] + ["missing"]
    options.update({"Lookup Key Column": draw(st.sampled_from(names)),
                    "Ignore Duplicates": draw(st.sampled_from(("true", "false")))})
    service = draw(st.sampled_from(("simple", "record")))
    if service == "simple":
        options["Lookup Value Column"] = draw(st.sampled_from(names))
    return service, options, content


def _lookup_seeds(folder) -> list[bytes]:
    return [write_csv(table, {}) for table in CSV_TABLES]


def _read_lookup(folder: Path, example: tuple[str, dict, bytes]) -> None:
    from flowactors.sdk.services import ServiceEnableError
    from flowactors.services.lookup import CSVRecordLookupService, SimpleCsvFileLookupService
    from flowactors.testing import enable_service

    kind, options, content = example
    path = folder / "lookup.csv"
    path.write_bytes(content)
    service_type = SimpleCsvFileLookupService if kind == "simple" else CSVRecordLookupService
    log = logging.getLogger(service_type.__module__)
    level = log.level
    log.setLevel(logging.ERROR)   # a warning an example (a key twice, no entries) says nothing here
    try:
        service = enable_service(service_type, {**options, "CSV File": str(path)})
    except ServiceEnableError as err:
        cause = err.__cause__
        if not isinstance(cause, ServiceEnableError):
            raise Finding(f"{service_type.__name__} let {type(cause).__name__} through: {cause}",
                          _signature_of(cause)) from cause
        clear_message(cause, service_type.__name__)
        expect(str(path) in str(cause), f"the error names no file: {cause}")
        return
    finally:
        log.setLevel(level)
    for key in _keys(content) + [1, 1.5, True, None, ""]:
        found = service.lookup({"key": key})
        expect(found is None or isinstance(found, str if kind == "simple" else dict), f"a lookup gave {found!r}")


def _keys(content: bytes) -> list[Any]:
    """Some texts of the content, to look up."""
    return [k.decode("latin-1").strip() for k in re.split(rb"[,;|\t\n]", content)[:6]]


def _signature_of(err: BaseException | None) -> str:
    from tests.fuzz_formats import signature

    return signature(err) if err is not None else "ServiceEnableError without a cause"


def _lookup_errors() -> tuple[type[BaseException], ...]:
    from flowactors.sdk.services import ServiceEnableError

    return (ServiceEnableError,)


def _path_errors() -> tuple[type[BaseException], ...]:
    from flowactors.sdk.record_path import RecordPathError

    return (RecordPathError,)


def text_formats() -> list[Format]:
    from tests.fuzz_records import record_errors

    return [
        Format("avro-schema-text", _schema_seeds, _schema_examples, _read_schema_text,
               record_errors(), names_place=False),
        Format("record-path", lambda folder: RECORD_PATHS, _path_examples, _read_path, _path_errors(),
               names_place=False),
        Format("lookup-csv-file", _lookup_seeds, lambda seeds: _lookup_examples(seeds), _read_lookup,
               _lookup_errors(), names_place=False),
    ]
