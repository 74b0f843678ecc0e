"""The record readers' fuzz targets (docs/formats/README.md, "Record readers"): every reader
service, the Avro schema text parser, the schema registry, RecordPath and the CSV lookup files,
fed valid inputs (made by writers, with the options each reader takes) and then damaged.

The only acceptable outcomes are a whole read (every batch of the reader's schema, of at most
``BATCH_RECORDS`` records, whose arrays are valid to the last byte) or the reader's documented
error: a ``RecordError`` (``MalformedRecordError``, ``SchemaMismatchError``,
``SchemaNotFoundError``), a ``RecordPathError`` for RecordPath, a ``ServiceEnableError`` of the
service's own for the lookup files; and its message must be one line that names the problem in
the reader's words: not empty, not more than one line (Python's ``splitlines``: a line break
or any other line boundary, such as a NEL quoted from the content), not the whole content, not
a Python error of the reader's code passed on alone (``'NoneType' object ...``; after the
reader's own words and a colon it is a detail). Anything else is a ``Finding``.

Readers that stream in batches of ``BATCH_BYTES`` (4 MiB) never cut a small example into
pieces; half the examples therefore read with the batch sizes made tiny (``small_batches``), so
that the code joining pieces (a record across two windows, a batch ending mid-document) runs.

This module holds the shared checks, the JSON, CSV and XML targets and ``record_formats`` (the
list); ``fuzz_records_binary.py`` the Avro and Parquet ones, ``fuzz_record_texts.py`` the schema
text, RecordPath and lookup ones.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from typing import Any, Iterator, Sequence

import orjson
from hypothesis import strategies as st

from tests.fuzz_formats import Finding, Format, expect, signature
from tests.fuzz_mutations import damaged, json_mutated, mutated

#: the longest message a reader's error may have (a message quoting a whole content is no message)
MESSAGE_MOST = 1000
#: what Python says of a mistake in code: a reader's message that holds one passed an error of its own on
_PYTHON_WORDS = re.compile(r"object has no attribute|object is not (subscriptable|iterable|callable)|"
                           r"unsupported operand|index out of range|takes \d+ positional|NoneType|"
                           r"unhashable type|not supported between instances|Traceback")

#: the module constants ``small_batches`` makes tiny, by module: (name, value)
_SMALL = {"flowactors.services.records.json": (("BATCH_BYTES", 96), ("BATCH_RECORDS", 3), ("_CUT_TAIL", 16)),
          "flowactors.services.records.csv": (("BATCH_BYTES", 128), ("BATCH_RECORDS", 3)),
          "flowactors.services.records.xml": (("BATCH_BYTES", 96), ("BATCH_RECORDS", 3), ("_READ", 40)),
          "flowactors.services.records.avro": (("BATCH_BYTES", 64), ("BATCH_RECORDS", 3)),
          "flowactors.services.records.parquet": (("BATCH_RECORDS", 3),),
          "flowactors.services.records.textual": (("BATCH_BYTES", 96), ("BATCH_RECORDS", 3))}


@contextlib.contextmanager
def small_batches(module: str, on: bool) -> Iterator[None]:
    """With ``on``: ``module``'s batch sizes (those of ``_SMALL`` it has) made tiny for the body."""
    import importlib

    target = importlib.import_module(module)
    saved = {name: getattr(target, name) for name, _ in _SMALL[module] if on and hasattr(target, name)}
    try:
        for name, value in _SMALL[module]:
            if name in saved:
                setattr(target, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(target, name, value)


def clear_message(err: BaseException, what: str) -> None:
    """``Finding`` unless ``err``'s message is one line naming the problem (module docstring)."""
    text = str(err)
    python = _PYTHON_WORDS.search(text)
    problem = ("is empty" if not text.strip() else "is not one line" if len(text.splitlines()) != 1
               else f"is longer than {MESSAGE_MOST} characters" if len(text) > MESSAGE_MOST
               else "is Python's own error" if python and ":" not in text[:python.start()] else None)
    if problem:
        raise Finding(f"{what}: the {type(err).__name__}'s message {problem} ({len(text)} characters): "
                      f"{text[:400]!r}", f"{signature(err)}: message {problem}")


@contextlib.contextmanager
def documented(errors: tuple[type[BaseException], ...], what: str) -> Iterator[None]:
    """Let ``errors`` through once their message is clear (``clear_message``); a
    ``MalformedRecordError``'s record index and offset must be None or whole numbers >= 0."""
    try:
        yield
    except errors as err:
        clear_message(err, what)
        for name in ("record", "offset"):
            value = getattr(err, name, None)
            expect(value is None or (type(value) is int and value >= 0), f"the error's {name} is {value!r}")
        raise


def read_records(service: type, properties: dict, content: bytes, attributes: dict | None = None,
                 small: bool = False) -> list:
    """Every batch of ``content`` read by the ``service`` enabled with ``properties`` (as a
    processor reads a FlowFile with ``attributes``), each checked: the reader's schema, at most
    ``BATCH_RECORDS`` records, valid arrays. ``RecordError`` (clear) is let through; with
    ``small``, read with ``small_batches``. A ``Schema Registry`` property names the registry
    ``REGISTRY``, holding the schemas of ``REGISTERED``."""
    import pyarrow as pa

    from flowactors.sdk.records import BATCH_RECORDS, RecordError
    from flowactors.services.records.registry import AvroSchemaRegistry
    from flowactors.testing import enable_service

    services = {REGISTRY: (AvroSchemaRegistry, REGISTERED)} if "Schema Registry" in properties else None
    reader_service = enable_service(service, properties, services=services)
    batches = []
    with small_batches(service.__module__, small), documented((RecordError,), service.__name__):
        reader = reader_service.create_reader(attributes or {}, io.BytesIO(content), len(content))
        schema = reader.schema()
        expect(isinstance(schema, pa.Schema), f"a schema {schema!r}")
        for batch in reader.batches():
            expect(batch.schema.equals(schema), f"a batch of schema {batch.schema}, not the reader's {schema}")
            expect(batch.num_rows <= BATCH_RECORDS, f"a batch of {batch.num_rows} records")
            try:
                batch.validate(full=True)
            except pa.ArrowInvalid as err:
                expect(False, f"a batch whose arrays are not valid: {err}")
            batches.append(batch)
    return batches


def record_errors() -> tuple[type[BaseException], ...]:
    from flowactors.sdk.records import RecordError

    return (RecordError,)


# --- JSON (JsonTreeReader: flowactors/services/records/json.py) -----------------------------------

#: record lists the JSON examples start from: every JSON kind, nesting, edges of numbers and strings
JSON_RECORDS = [
    [{"id": 1, "name": "John Doe", "balance": 123.45, "active": True, "tags": ["a", "b"],
      "address": {"city": "Boston", "zip": "02101"}, "born": "2017-10-20", "stamp": "2017-10-20T11:00:00Z",
      "none": None},
     {"id": 2, "name": "Jane \u00e9\u4e2d\U0001f600", "balance": -4.5e-7, "active": False, "tags": [],
      "address": {"city": "New York", "zip": None}, "born": "1999-12-31", "stamp": "2000-01-01T00:00:00.123Z",
      "none": None}],
    [{"a": {"b": {"c": [{"d": 1}, {"d": 2.5}]}}, "m": {"k1": 1, "k2": 2}}, {"a": {"b": {"c": []}}, "m": {}}],
    [{"x": 9223372036854775807, "y": -9223372036854775808, "z": 1e308, "s": "\"\\/\b\f\n\r\t\u0000\u2028"}],
    [{"mixed": 1}, {"mixed": "one"}, {"mixed": [1, "two"]}, {"mixed": {"one": 1}}, {"mixed": None}, {}],
]
ACCOUNT_SCHEMA = {"type": "record", "name": "account", "namespace": "fuzz", "fields": [
    {"name": "id", "type": "int"}, {"name": "name", "type": "string"}, {"name": "balance", "type": "double"},
    {"name": "active", "type": ["null", "boolean"]}, {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "address", "type": ["null", {"type": "record", "name": "address", "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"]}]}]},
    {"name": "born", "type": ["null", {"type": "int", "logicalType": "date"}]},
    {"name": "stamp", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
    {"name": "none", "type": ["null", "string"]}]}
NESTED_SCHEMA = {"type": "record", "name": "nested", "fields": [
    {"name": "a", "type": ["null", {"type": "record", "name": "a", "fields": [
        {"name": "b", "type": {"type": "record", "name": "b", "fields": [
            {"name": "c", "type": {"type": "array", "items": {"type": "record", "name": "c", "fields": [
                {"name": "d", "type": ["null", "int", "double"]}]}}}]}}]}]},
    {"name": "m", "type": {"type": "map", "values": "long"}},
    {"name": "x", "type": ["null", "long"]}, {"name": "s", "type": ["null", "string", "bytes"]},
    {"name": "mixed", "type": ["null", "int", "string", {"type": "map", "values": "int"}]}]}
WRAPPER_SCHEMA = {"type": "record", "name": "wrapper", "fields": [
    {"name": "meta", "type": ["null", {"type": "record", "name": "meta",
                                       "fields": [{"name": "count", "type": "int"}]}]},
    {"name": "records", "type": {"type": "array", "items": ACCOUNT_SCHEMA}}]}
_GIVEN = {"Schema Access Strategy": "Use 'Schema Text' Property"}
#: the schema registry a reader may name, and its schemas
REGISTRY = "registry"
REGISTERED = {"account": json.dumps(ACCOUNT_SCHEMA), "nested": json.dumps(NESTED_SCHEMA)}
_BY_NAME = {"Schema Access Strategy": "Use 'Schema Name' Property", "Schema Registry": REGISTRY,
            "Schema Version": "${schema.version}", "Schema Branch": "${schema.branch}"}
#: the attributes a FlowFile may have for a schema found by name
SCHEMA_ATTRIBUTES = st.fixed_dictionaries({}, optional={
    "schema.name": st.sampled_from(("account", "nested", "missing", "", " account", "a\nb")),
    "schema.version": st.sampled_from(("1", "0", "-1", "x", "", "99999999999999999999999", "1.5")),
    "schema.branch": st.sampled_from(("main", ""))})
_FORMATS = {"Date Format": "yyyy-MM-dd", "Timestamp Format": "yyyy-MM-dd'T'HH:mm:ssX", "Time Format": "HH:mm:ss"}
_NESTED_FIELD = {"Starting Field Strategy": "Nested Field", "Starting Field Name": "records"}
JSON_OPTIONS = [
    {}, _FORMATS, {**_GIVEN, "Schema Text": json.dumps(ACCOUNT_SCHEMA)},
    {**_GIVEN, "Schema Text": json.dumps(ACCOUNT_SCHEMA), **_FORMATS},
    {**_GIVEN, "Schema Text": json.dumps(NESTED_SCHEMA)},
    _NESTED_FIELD, {**_NESTED_FIELD, **_GIVEN, "Schema Text": json.dumps(ACCOUNT_SCHEMA)},
    {**_NESTED_FIELD, **_GIVEN, "Schema Text": json.dumps(WRAPPER_SCHEMA), "Schema Application Strategy": "Whole JSON"},
    _BY_NAME, {**_BY_NAME, **_FORMATS},
]
_LAYOUTS = ("array", "pretty", "lines", "concatenated", "object", "nested", "bom")


def render_json(document: Any, layout: str) -> bytes:
    """``document`` (records, or what a mutation made of them) as JSON text laid out as ``layout``
    says: an array (compact or indented), one object a line, objects one after another, the first
    object alone, the array in a wrapper's ``records`` field, an array after a byte order mark."""
    records = document if isinstance(document, list) else [document]
    if layout == "pretty":
        return orjson.dumps(document, option=orjson.OPT_INDENT_2)
    if layout == "lines":
        return b"\n".join(orjson.dumps(r) for r in records)
    if layout == "concatenated":
        return b" ".join(orjson.dumps(r) for r in records)
    if layout == "object":
        return orjson.dumps(records[0] if records else {})
    if layout == "nested":
        return orjson.dumps({"meta": {"count": len(records)}, "records": document})
    return (b"\xef\xbb\xbf" if layout == "bom" else b"") + orjson.dumps(document)


#: the deepest nesting drawn: past Jackson's limit (1000) NiFi refuses; Hypothesis raises the recursion
#: limit while a test runs, so a reader that recurses goes that much deeper (seconds of CPU) before it fails
DEEPEST_JSON = 1100


def _deep_json(depth: int, kind: str) -> bytes:
    """A record whose one field holds ``depth`` nested objects or arrays."""
    opening, closing = (b'{"a":', b"}") if kind == "object" else (b"[", b"]")
    return b'[{"deep":' + opening * depth + b"1" + closing * depth + b"}]"


def _json_seeds(folder) -> list[bytes]:
    return [render_json(records, layout) for records in JSON_RECORDS for layout in _LAYOUTS]


def _json_examples(seeds: list[bytes]) -> st.SearchStrategy:
    rendered = st.tuples(json_mutated(JSON_RECORDS), st.sampled_from(_LAYOUTS)).map(lambda d: render_json(*d))
    deep = st.tuples(st.integers(1, DEEPEST_JSON), st.sampled_from(("object", "array"))).map(lambda d: _deep_json(*d))
    contents = st.one_of(rendered, rendered.flatmap(lambda text: mutated([text])), damaged(seeds), deep)
    return st.tuples(st.sampled_from(JSON_OPTIONS), SCHEMA_ATTRIBUTES, contents, st.booleans())


def _read_json(folder, example) -> None:
    from flowactors.services.records.json import JsonTreeReader

    properties, attributes, content, small = example
    read_records(JsonTreeReader, properties, content, attributes, small=small)


# --- CSV (CSVReader: flowactors/services/records/csv.py) ------------------------------------------

#: tables the CSV examples start from: header and rows of text (values with separators, quotes,
#: line ends, spaces, nulls, numbers, booleans, dates, non-ASCII)
CSV_TABLES = [
    [["id", "name", "balance", "active", "born"], ["1", "John Doe", "4750.89", "true", "2017-10-20"],
     ["2", " Jane, \"J\" Doe ", "-1e-7", "FALSE", ""], ["3", "multi\nline", "", "", "1999-12-31"]],
    [["a", "b", "a"], ["x", "", "NULL"], ["\u00e9\u4e2d", "'quoted'", "\\N"], ["# not a comment", "|", "\t"]],
    [["only"], ["9223372036854775808"], ["-0"], ["NaN"]],
]
_CSV_TYPES = ["string", ["null", "string"], "int", ["null", "int"], "long", ["null", "double"], "float", "boolean",
              ["null", {"type": "int", "logicalType": "date"}],
              ["null", {"type": "long", "logicalType": "timestamp-millis"}],
              ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}]]
_CSV_VALUES = st.one_of(st.text(max_size=8), st.integers(-(1 << 64), 1 << 64).map(str),
                        st.floats().map(repr), st.sampled_from(("", " ", "NULL", "true", "2017-10-20", '"', "\\")))


@st.composite
def csv_dialect(draw: st.DrawFn) -> dict:
    """The CSVReader's format properties: a predefined format, or a custom one."""
    from flowactors.services.records.csv import FORMATS

    form = draw(st.sampled_from(FORMATS[:1] * 4 + FORMATS))
    options = {"CSV Format": form, "Trim Fields": draw(st.sampled_from(("true", "false"))),
               "Treat First Line as Header": draw(st.sampled_from(("true", "false"))),
               "Trim Double Quote": draw(st.sampled_from(("true", "false"))),
               "Allow Duplicate Header Names": draw(st.sampled_from(("true", "false"))),
               "Character Set": draw(st.sampled_from(("UTF-8", "UTF-8", "ISO-8859-1", "UTF-16")))}
    if form == "Custom Format":
        options.update({"Value Separator": draw(st.sampled_from((",", ";", "\\t", "|", " ", "\\u0001"))),
                        "Quote Character": draw(st.sampled_from(('"', "'", "|"))),
                        "Escape Character": draw(st.sampled_from(("\\", "", "/", '"'))),
                        "Record Separator": draw(st.sampled_from(("\\n", "\\r\\n")))})
        comment = draw(st.sampled_from((None, "#", ";")))
        null = draw(st.sampled_from((None, "", "NULL", " null ", "\\N")))
        options.update({k: v for k, v in (("Comment Marker", comment), ("Null String", null)) if v is not None})
    return options


def _unescaped(value: str) -> str:
    return value.encode().decode("unicode_escape") if value.startswith("\\") else value


def write_csv(table: list[list[str]], options: dict) -> bytes:
    """``table`` written as the dialect of ``options`` says (Python's csv writer; a comment line
    and a blank line put in when the dialect has comments), in its character set."""
    from flowactors.services.records.csv_formats import PREDEFINED

    form = options.get("CSV Format", "Custom Format")
    known = PREDEFINED.get(form)
    separator = known.separator if known else _unescaped(options.get("Value Separator", ","))
    quote = (known.quote if known else options.get("Quote Character", '"')) or '"'
    escape = known.escape if known else (options.get("Escape Character") or None)
    out = io.StringIO()
    writer = csv.writer(out, delimiter=separator, quotechar=quote, escapechar=escape if escape != quote else None,
                        lineterminator=_unescaped(options.get("Record Separator", "\\n")), quoting=csv.QUOTE_MINIMAL)
    comment = options.get("Comment Marker")
    for number, row in enumerate(table):
        if comment and number == 1:
            out.write(f"{comment} a comment{separator}with a separator\n\n")
        writer.writerow(row)
    return out.getvalue().encode(options.get("Character Set", "UTF-8"), "replace")


@st.composite
def csv_table(draw: st.DrawFn) -> list[list[str]]:
    names = draw(st.lists(st.sampled_from(("id", "name", "when", "flag", " spaced ", "x")), min_size=1, max_size=4))
    rows = draw(st.lists(st.lists(_CSV_VALUES, min_size=len(names), max_size=len(names) + 1), max_size=4))
    return [names, *rows]


@st.composite
def _csv_schema(draw: st.DrawFn, table: list[list[str]]) -> dict:
    """How the reader finds the schema: inferred, from the header, or given (a field a column)."""
    strategy = draw(st.sampled_from(("Infer Schema", "Use String Fields From Header", "Use 'Schema Text' Property")))
    if strategy != "Use 'Schema Text' Property":
        return {"Schema Access Strategy": strategy}
    names = list(dict.fromkeys(re.sub(r"\W", "_", n.strip()) or "f" for n in table[0]))
    fields = [{"name": n if n[0].isalpha() else f"f{n}", "type": draw(st.sampled_from(_CSV_TYPES))} for n in names]
    return {**_GIVEN, "Schema Text": json.dumps({"type": "record", "name": "row", "fields": fields}),
            "Ignore CSV Header Column Names": draw(st.sampled_from(("true", "false"))),
            **({"Date Format": "yyyy-MM-dd"} if draw(st.booleans()) else {})}


@st.composite
def _csv_examples_drawn(draw: st.DrawFn, seeds: Sequence[bytes]) -> tuple:
    options = draw(csv_dialect())
    table = draw(st.sampled_from(CSV_TABLES) | csv_table())
    options.update(draw(_csv_schema(table)))
    content = write_csv(table, options)
    kind = draw(st.sampled_from(("valid", "mutated", "mutated", "other")))
    if kind == "mutated":
        content = draw(mutated([content, *seeds]))
    elif kind == "other":
        content = draw(damaged(seeds))
    return options, content, draw(st.booleans())


def _csv_seeds(folder) -> list[bytes]:
    return [write_csv(table, {}) for table in CSV_TABLES]


def _read_csv(folder, example) -> None:
    from flowactors.services.records.csv import CSVReader

    properties, content, small = example
    read_records(CSVReader, properties, content, small=small)


# --- XML (XMLReader: flowactors/services/records/xml.py) ------------------------------------------

XML_DOCUMENTS = [
    b"""<PEOPLE attr="attr1">
    <PERSON ID="P1"><NAME>Cleve Butler</NAME><AGE>42</AGE><COUNTRY>USA</COUNTRY></PERSON>
    <PERSON ID="P2"><NAME>Ainslie Fletcher</NAME><AGE>33</AGE><COUNTRY>UK</COUNTRY></PERSON>
    <PERSON ID="P3"><NAME>Am\xc3\xa9lie Bonfils</NAME><AGE>74</AGE><COUNTRY>FR</COUNTRY></PERSON>
</PEOPLE>""",
    b"""<?xml version="1.0" encoding="UTF-8"?>
<!-- a comment --><root xmlns:n="urn:x"><n:rec n:id="1">text<child>1</child><child>2</child>tail<?pi x?></n:rec>
<rec><child><![CDATA[<not a tag> & ]]></child><nested><deep a="b">5.5</deep></nested></rec><rec/></root>""",
    b"""<PERSON ID="P1"><NAME>Cleve Butler</NAME><AGE>42</AGE><ADDRESS><CITY>X</CITY></ADDRESS></PERSON>""",
    b"""<?xml version="1.0" encoding="ISO-8859-1"?><r><e><v>caf\xe9</v><when>2017-10-20</when></e></r>""",
    b"""<!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY ext SYSTEM "file:///etc/passwd">]>
<r><e><v>&c;</v><w>&ext;</w><x>&#x1F600;&lt;&amp;</x></e></r>""",
]
PERSON_SCHEMA = {"type": "record", "name": "PERSON", "fields": [
    {"name": "ID", "type": ["null", "string"]}, {"name": "NAME", "type": ["null", "string"]},
    {"name": "AGE", "type": ["null", "int"]}, {"name": "COUNTRY", "type": ["null", "string"]},
    {"name": "child", "type": ["null", {"type": "array", "items": "long"}]},
    {"name": "nested", "type": ["null", {"type": "record", "name": "nested", "fields": [
        {"name": "deep", "type": ["null", "double"]}]}]},
    {"name": "when", "type": ["null", {"type": "int", "logicalType": "date"}]},
    {"name": "ADDRESS", "type": ["null", {"type": "map", "values": "string"}]}]}


@st.composite
def _xml_options(draw: st.DrawFn) -> tuple[dict, dict]:
    """(properties, the FlowFile's attributes) of an XMLReader."""
    array = draw(st.sampled_from(("true", "false", "${xml.stream.is.array}")))
    options = {"Expect Records as Array": array, "Parse XML Attributes": draw(st.sampled_from(("true", "false")))}
    if draw(st.booleans()):
        options["Attribute Prefix"] = draw(st.sampled_from(("attr_", "@", " ")))
    if draw(st.booleans()):
        options["Field Name for Content"] = draw(st.sampled_from(("content", "NAME", "ID")))
    if draw(st.booleans()):
        options.update({**_GIVEN, "Schema Text": json.dumps(PERSON_SCHEMA), "Date Format": "yyyy-MM-dd"})
    attributes = {"xml.stream.is.array": draw(st.sampled_from(("true", "false", "maybe")))} if draw(st.booleans()) \
        else {}
    return options, attributes


_XML_NAMES = st.sampled_from(("PERSON", "NAME", "AGE", "child", "nested", "deep", "n:rec", "x", "ID", "when"))


def _xml_tree() -> st.SearchStrategy[bytes]:
    """Well-formed documents of random elements, attributes, text and nesting."""
    text = st.text(max_size=10).map(lambda t: re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]", "", t))

    def element(children: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
        return st.tuples(_XML_NAMES, st.dictionaries(st.sampled_from(("ID", "a", "NAME")), text, max_size=2),
                         st.lists(children | text.map(_xml_text), max_size=4)).map(_xml_element)

    leaf = st.tuples(_XML_NAMES, st.just({}), st.lists(text.map(_xml_text), max_size=1)).map(_xml_element)
    return st.recursive(leaf, element, max_leaves=12).map(
        lambda body: b'<root xmlns:n="urn:n">' + body + b"</root>")


def _xml_text(text: str) -> bytes:
    return text.replace("&", "&amp;").replace("<", "&lt;").encode()


def _xml_element(parts: tuple) -> bytes:
    name, attributes, children = parts
    attrs = b"".join(b' %s="%s"' % (k.encode(), _xml_text(v).replace(b'"', b"&quot;")) for k, v in attributes.items())
    return b"<%s%s>%s</%s>" % (name.encode(), attrs, b"".join(children), name.encode())


def _xml_examples(seeds: list[bytes]) -> st.SearchStrategy:
    trees = _xml_tree()
    contents = st.one_of(st.sampled_from(seeds), trees, mutated(seeds), trees.flatmap(lambda d: mutated([d])),
                         damaged(seeds))
    return st.tuples(_xml_options(), contents, st.booleans())


def _read_xml(folder, example) -> None:
    from flowactors.services.records.xml import XMLReader

    (properties, attributes), content, small = example
    read_records(XMLReader, properties, content, attributes, small=small)


# --- the list -----------------------------------------------------------------------------------------


def record_formats() -> list[Format]:
    """Every record reader's target (docs/formats/README.md, "Record readers")."""
    from tests.fuzz_record_texts import text_formats
    from tests.fuzz_records_binary import binary_formats

    return [
        Format("json-records", _json_seeds, _json_examples, _read_json, record_errors(), names_place=False),
        Format("csv-records", _csv_seeds, lambda seeds: _csv_examples_drawn(seeds), _read_csv, record_errors(),
               names_place=False),
        Format("xml-records", lambda folder: XML_DOCUMENTS, _xml_examples, _read_xml, record_errors(),
               names_place=False),
        *binary_formats(),
        *text_formats(),
    ]
