"""Every reader of every format flowactors owns, fed damaged inputs (tests/fuzz_formats.py):
valid files made by the real writer and mutated, and arbitrary bytes. The only acceptable
outcome is a whole read or the format's documented error naming the file (or offset); never
another exception, a hang or an unbounded allocation.

This is the short run of ``make test``: a fixed number of examples a format, derandomized, no
example database. ``python -m bench.fuzz --minutes 5`` (scenario 14 of ``make bench``) runs the
same for minutes. Every finding keeps its example here: a finding in a reader of another area
(``repositories/``) is kept marked ``xfail(strict=True)`` with what it is until that area fixes
the reader, which turns it into a failure, and the mark goes.
"""

from __future__ import annotations

import io
import re
import struct
import zlib
from pathlib import Path

import orjson
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings

from tests.fuzz_formats import Finding, check, formats
from tests.fuzz_mutations import tail_crc
from tests.fuzz_record_texts import deep_schema
from tests.fuzz_records_binary import container_file, with_header
from tests.fuzz_records import record_formats

FORMATS = {fmt.name: fmt for fmt in [*formats(), *record_formats()]}
#: examples a record reader's target (tests/fuzz_records.py) runs in the short run: a few seconds for all
RECORD_EXAMPLES = 60
#: examples a format in the short run (the slow ones open a whole repository an example)
EXAMPLES = {"wal-log": 100, "provenance-journal": 100, "provenance-event-file": 100, "provenance-index": 100,
            **{fmt.name: RECORD_EXAMPLES for fmt in record_formats()}}
DEFAULT_EXAMPLES = 300

@pytest.mark.parametrize("name", sorted(FORMATS))
def test_reader_gives_a_whole_read_or_its_documented_error(name: str, tmp_path: Path) -> None:
    """A finding of one of the open examples below (``OPEN_RECORD_FINDINGS``: the same exception
    from the same line) is tracked by its own xfail test, not again here."""
    fmt = FORMATS[name]
    known = _open_signatures(name, tmp_path)

    @settings(max_examples=EXAMPLES.get(name, DEFAULT_EXAMPLES), derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(fmt.examples(tmp_path))
    def read(example) -> None:
        try:
            check(fmt, tmp_path, example)
        except Finding as finding:
            if finding.signature not in known:
                raise

    read()


def _open_signatures(name: str, tmp_path: Path) -> set[str]:
    """The signatures of the findings of ``name``'s open examples (those its reader still has)."""
    found = set()
    for fmt, _finding, example in OPEN_RECORD_FINDINGS:
        if fmt == name:
            try:
                check(FORMATS[fmt], tmp_path, example)
            except Finding as finding:
                found.add(finding.signature)
    return found


# --- regression examples of the readers fixed here ---------------------------------------------------


def _entry(**changes) -> bytes:
    entry = {"version": 1, "at": 1795688189.93, "flow": "f", "processor": "put", "where": "on_trigger",
             "error": "E: x", "traceback": None, "node": None, **changes}
    return orjson.dumps(entry)


@pytest.mark.parametrize("line", [
    _entry(at=1e300), _entry(at=-1e300), b'{"version":1,"at":NaN,"processor":"p","where":"w","error":"e"}',
    _entry(at=True), _entry(traceback={"a": 1}), _entry(node=[1]), _entry(flow=3),
], ids=["far-future", "far-past", "nan", "bool", "traceback-object", "node-list", "flow-number"])
def test_error_log_leaves_out_an_entry_of_wrong_types(line: bytes, tmp_path: Path) -> None:
    from flowactors.ops.error_log import read_errors

    (tmp_path / "errors.jsonl").write_bytes(_entry() + b"\n" + line + b"\n")
    entries, unreadable = read_errors(tmp_path)
    assert len(entries) == 1 and unreadable == [2]
    check(FORMATS["error-log"], tmp_path, _entry() + b"\n" + line)   # and `flowactors errors` prints the rest


@pytest.mark.parametrize("document, problem", [
    ({"flowactors_cluster": 1, "nodes": [{"name": "n0", "resource": {"a": 1}}]}, "is damaged ('nodes'"),
    ({"flowactors_cluster": 1, "nodes": "n0"}, "is damaged ('nodes'"),
    ([1], "is damaged (not a JSON object)"),
    ({"flowactors_cluster": 2, "nodes": 5}, "has format version 2"),
])
def test_topology_refuses_a_malformed_file_naming_it(document, problem: str, tmp_path: Path) -> None:
    from flowactors.engine.cluster.topology import read_topology
    from flowactors.engine.errors import TopologyError

    (tmp_path / "cluster.json").write_bytes(orjson.dumps(document))
    with pytest.raises(TopologyError, match=re.escape(f"{tmp_path / 'cluster.json'} {problem}")):
        read_topology(tmp_path)


@pytest.mark.parametrize("state", [{"version": 1, "values": {"a": [1]}}, {"version": True, "values": {}},
                                   {"version": -1, "values": {}}])
def test_cluster_state_refuses_an_entry_of_wrong_types(state: dict, tmp_path: Path) -> None:
    from flowactors.engine.cluster.cluster_state import ClusterStateService
    from flowactors.engine.errors import ClusterStateError

    (tmp_path / "cluster-state.json").write_bytes(orjson.dumps({"flowactors_cluster_state": 1,
                                                                "components": {"f/p": state}}))
    with pytest.raises(ClusterStateError, match="cluster-state.json is damaged"):
        ClusterStateService(str(tmp_path))


def _definition(**changes) -> bytes:
    return orjson.dumps({"flowactors_flow": 2, "name": "f", "processors": [], "connections": [], **changes})


@pytest.mark.parametrize("text, problem", [
    (_definition(parameter_context={"a": 1}), "'parameter_context' must be a string, not an object"),
    (_definition(name=[1]), "'name' must be a string, not a list"),
    (_definition(parameter_contexts=7), "'parameter_contexts' must be a list of objects"),
    (_definition(parameter_context="env", parameter_contexts=[{"name": "env", "parameters": [
        {"name": "dir", "value": {}}]}]), "parameter 'dir' has the value {}; give it as a string"),
    (_definition(parameter_context="env", parameter_contexts=[{"name": "env", "inherits": [{"a": 1}]}]),
     "parameter context 'env': 'inherits' must be a list of context names, not [{'a': 1}]"),
    (_definition(parameter_context="env", parameter_contexts=[{"name": "env", "parameters": [{"name": "d"}]}],
                 processors=[{"name": "g", "type": "GenerateFlowFile", "properties": {"File Size": "#{ 1 KB"}}]),
     "property 'File Size': '#{' at index 0 does not start a reference"),
    (_definition(processors=[{"name": "r", "type": "ReplaceText", "properties": {"Character Set": "a\x00"}}]),
     "is not a character set Python knows"),
    (_definition(processors=[{"name": "u", "type": "UnpackContent", "properties": {"File Filter": "a{99999999999}"}}]),
     "invalid regular expression 'a{99999999999}'"),
    (_definition(processors=[{"name": "u", "type": "UnpackContent", "properties": {"File Filter": "(" * 5000}}]),
     "invalid regular expression"),
])
def test_flow_definition_of_wrong_types_is_one_validation_error(text: bytes, problem: str) -> None:
    from flowactors.driver.loading import load_definition
    from flowactors.sdk.flow import FlowValidationError

    with pytest.raises(FlowValidationError, match=re.escape(problem)):
        load_definition(text).validate()


def test_a_parameter_given_as_a_number_is_its_text() -> None:
    from flowactors.driver.loading import load_definition

    flow = load_definition(_definition(parameter_context="env", parameter_contexts=[
        {"name": "env", "parameters": [{"name": "n", "value": 5}, {"name": "b", "value": True}]}]))
    assert {p.name: p.value for p in flow.parameter_contexts["env"].parameters.values()} == {"n": "5", "b": "true"}


def _nifi(change) -> dict:
    from tests.nifi_flows import orders_flow

    definition = orders_flow("in", "out", 10)
    change(definition["flowContents"])
    return definition


@pytest.mark.parametrize("change, problem", [
    (lambda root: root["connections"][0].pop("destination"), "the definition.flowContents.connections[0] lacks "
                                                             "'destination'"),
    (lambda root: root.update(processors={"a": 1}), "flowContents.processors must be a list, not dict"),
    (lambda root: root["processors"][0].update(properties=[1]), "processors[0].properties must be an object"),
    (lambda root: root["connections"][0].update(selectedRelationships=[None]),
     "connections[0].selectedRelationships[0] must be a string, not None"),
    (lambda root: root["processGroups"][0]["processors"][0].update(schedulingPeriod=["1 sec"]),
     "processGroups[0].processors[0].schedulingPeriod must be a string"),
    (lambda root: root["connections"][0].update(backPressureObjectThreshold=[5]),
     "connections[0].backPressureObjectThreshold must be a whole number"),
    (lambda root: root["connections"][0]["destination"].update(type=None, id="nowhere"),
     "a connection ends at 'Fetch', which is not in the definition"),
])
def test_nifi_export_of_wrong_shape_is_one_import_error_naming_the_place(change, problem: str) -> None:
    from flowactors.driver.loading import load_definition
    from flowactors.driver.nifi_export import NiFiImportError

    with pytest.raises(NiFiImportError, match=re.escape(problem)):
        load_definition(orjson.dumps(_nifi(change)))


# --- the fuzzers' findings in the repositories' readers, fixed there (aa96ef7, ea23595, 1e1ccbc) ----------


def _journal_batch_edit(seeds: dict, part: int, edit, writable: bool) -> tuple[str, bytes, bool]:
    """The first journal with its first batch's index part (``part`` 0) or rest (1) edited as
    JSON by ``edit``, framed and checksummed again."""
    name = sorted(seeds["journals"])[0]
    journal = seeds["journals"][name]
    (length,) = struct.unpack_from("<I", journal, 16)
    payload = journal[24:24 + length]
    _count, first, events, size = struct.unpack_from("<IQII", payload)
    batch = payload[20:20 + size]
    (index_length,) = struct.unpack_from("<I", batch, 1)
    parts = [orjson.loads(batch[5:5 + index_length]), orjson.loads(batch[5 + index_length:])]
    edit(parts[part])
    index = orjson.dumps(parts[0])
    batch = batch[:1] + struct.pack("<I", len(index)) + index + orjson.dumps(parts[1])
    payload = payload[:4] + struct.pack("<QII", first, events, len(batch)) + batch + payload[20 + size:]
    record = struct.pack("<II", len(payload), zlib.crc32(payload)) + payload
    return name, journal[:16] + record + journal[24 + length:], writable


def _event_file_batch_edit(seeds: dict, part: int, edit) -> tuple[str, bytes, bool]:
    """The event file with its first block's first batch edited as ``_journal_batch_edit`` does,
    compressed and framed again (read read-only)."""
    name = next(n for n in sorted(seeds["files"]) if n.endswith(".prov"))
    data = seeds["files"][name]
    clen, _crc, _ulen, count, first, last = struct.unpack_from("<IIIIQQ", data, 16)
    raw = zstandard.ZstdDecompressor().decompress(data[48:48 + clen])
    journal = b"\0" * 16 + struct.pack("<II", len(raw), zlib.crc32(raw)) + raw   # a journal of one record
    _, edited, _ = _journal_batch_edit({"journals": {"j": journal}}, part, edit, False)
    raw = edited[24:]
    compressed = zstandard.ZstdCompressor().compress(raw)
    block = struct.pack("<IIIIQQ", len(compressed), zlib.crc32(compressed), len(raw), count, first, last) + compressed
    return name, data[:16] + block + data[48 + clen:], False


def _toc_with_block_offset(seeds: dict, offset: int) -> tuple[str, bytes, bool]:
    name = next(n for n in sorted(seeds["files"]) if n.endswith(".toc"))
    data = bytearray(seeds["files"][name])
    struct.pack_into("<Q", data, 52 + 8, offset)
    return name, tail_crc(bytes(data)), False


def _index_column(position: int, value):
    """An edit of a batch's index part: its column ``position`` (of ``INDEX_FIELDS``) shared ``value``."""
    return lambda index: index[1].__setitem__(position, [0, value])


#: (format, what the reader did with it before its fix, how to build the example from the format's valid inputs)
REPOSITORY_FINDINGS = [
    ("wal-values", "a journal entry (checksum right) whose removal count is 0xFFFFFFFF: decode_journal_entry "
                   "makes a list of that many keys before it compares the count with the entry's length "
                   "(records.py, decode_journal_entry: rkeys = [...] for i in range(nr)): minutes of CPU and "
                   "gigabytes, not RecordError",
     lambda seeds: ("journal", tail_crc(struct.pack(">BIIIII", 2, 0, 0xFFFFFFFF, 0, 0, 0) + b"\0\0\0\x02[]"
                                        + b"\0" * 4))),
    ("provenance-journal", "a batch whose component_id column is the number 5 (checksum right): AttributeError "
                           "in index.term_key at the merge",
     lambda seeds: _journal_batch_edit(seeds, 0, _index_column(5, 5), True)),
    ("provenance-journal", "a batch whose event_type column is '/': KeyError in index._type_key at the merge",
     lambda seeds: _journal_batch_edit(seeds, 0, _index_column(0, "/"), True)),
    ("provenance-journal", "a batch whose timestamp column is a list: TypeError in merge._write",
     lambda seeds: _journal_batch_edit(seeds, 0, _index_column(1, []), True)),
    ("provenance-journal", "a batch whose flowfile_uuid column is an object: the read-only repository's events() "
                           "returns it as the event's uuid (no error)",
     lambda seeds: _journal_batch_edit(seeds, 0, _index_column(2, {"a": 1}), False)),
    ("provenance-journal", "a batch whose attribute maps are an object, not a list: KeyError 0 in event._expand, "
                           "not ProvenanceFormatError",
     lambda seeds: _journal_batch_edit(seeds, 1, lambda rest: rest.__setitem__(1, {}), False)),
    ("provenance-journal", "a batch whose timestamp column is a list, read-only: TypeError in event.matches "
                           "when a search compares times",
     lambda seeds: _journal_batch_edit(seeds, 0, _index_column(1, []), False)),
    ("provenance-journal", "a batch whose updated_size column is 2**63: struct.error (argument out of range) "
                           "packing the index entry at the merge",
     lambda seeds: _journal_batch_edit(seeds, 0, _index_column(8, 1 << 63), True)),
    ("provenance-event-file", "a block (checksum right) whose first batch's attribute maps are an object, not a "
                              "list: KeyError 0 in event._expand, not ProvenanceFormatError",
     lambda seeds: _event_file_batch_edit(seeds, 1, lambda rest: rest.__setitem__(1, {}))),
    ("provenance-event-file", "a block whose first batch's flowfile_uuid column is an object: events() returns it "
                              "as the event's uuid (no error)",
     lambda seeds: _event_file_batch_edit(seeds, 0, _index_column(2, {"a": 1}))),
    ("provenance-event-file", "a table of contents (checksum right) whose first block offset is 2**64 - 1: "
                              "OverflowError from os.pread in read_block, not ProvenanceFormatError",
     lambda seeds: _toc_with_block_offset(seeds, (1 << 64) - 1)),
    ("provenance-index", "next-event-id holding JSON null: AttributeError in merge.read_next_id (data.get)",
     lambda seeds: ("next-event-id", b"null", True)),
    ("provenance-index", "a meta key 'file:abc' (an id of 3 bytes): struct.error in IndexShard.__init__",
     lambda seeds: ("meta", b"file:abc", None, b"", True)),
    ("provenance-index", "an events key of 3 bytes: struct.error in IndexShard._refresh_id_bounds",
     lambda seeds: ("events", b"abc", None, seeds["tables"]["events"][0][1], True)),
    ("provenance-index", "an events value of 5 bytes: struct.error in the search's _walk_events",
     lambda seeds: ("events", seeds["tables"]["events"][0][0], None, b"abcde", False)),
]


@pytest.mark.parametrize("fmt, finding, build", [
    pytest.param(fmt, finding, build, id=f"{fmt}-{number}") for number, (fmt, finding, build) in
    enumerate(REPOSITORY_FINDINGS)])
def test_repository_reader_handles_what_the_fuzzer_found(fmt: str, finding: str, build, tmp_path: Path) -> None:
    """Each was a finding (``finding`` says what the reader did); now a whole read or the
    format's documented error naming the file."""
    check(FORMATS[fmt], tmp_path, build(FORMATS[fmt].seeded(tmp_path)), cpu_seconds=2)


# --- the record readers' targets (tests/fuzz_records.py): what they found -------------------------------


def _parquet(table: dict, **options) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pa.table(table), out, **options)
    return out.getvalue()


def _schema_text(*fields: dict, **record) -> bytes:
    return orjson.dumps({"type": "record", "name": "r", **record, "fields": list(fields)})


_BY_NAME = {"Schema Access Strategy": "Use 'Schema Name' Property", "Schema Registry": "registry",
            "Schema Version": "${schema.version}"}
_TIMESTAMP_COLUMN = {"Schema Access Strategy": "Use 'Schema Text' Property", "Treat First Line as Header": "true",
                     "Schema Text": _schema_text({"name": "a", "type": ["null", {"type": "long",
                                                                                "logicalType": "timestamp-millis"}]}
                                                 ).decode()}
_DATE_FIELD = {"Schema Access Strategy": "Use 'Schema Text' Property",
               "Schema Text": _schema_text({"name": "d", "type": ["null", {"type": "int", "logicalType": "date"}]}
                                           ).decode()}
_LONG_NAME = "a" * 2000

#: (target, what the reader did with it before its fix, the example): fixed in the readers this area owns
RECORD_FINDINGS = [
    ("json-records", "Schema Version (here the attribute schema.version) 'x': ValueError from int() in "
                     "access.given_schema, not SchemaNotFoundError",
     (_BY_NAME, {"schema.name": "account", "schema.version": "x"}, b"[]", False)),
    ("avro-schema-text", "a schema text holding '${' and a line break: the expression language's error (a "
                         "registry's dynamic property, a reader's Schema Text is an expression) quotes it raw, two "
                         "lines",
     _schema_text(doc="${\n")),
    ("xml-records", "libxml2's message of a NUL character holds a line break: a MalformedRecordError of two lines",
     (({"Expect Records as Array": "true"}, {}), b"<r>\x00</r>", False)),
    ("xml-records", "an element named ':n' (a namespace error libxml2 only warns of): ValueError from lxml's "
                    "QName in xml._local",
     (({"Expect Records as Array": "true"}, {}), b"<r><:n>1</:n></r>", False)),
    ("avro-schema-text", "a logicalType that is a list: TypeError (unhashable type) in schema._logical",
     _schema_text({"name": "a", "type": {"type": "int", "logicalType": []}})),
    ("avro-schema-text", "a fixed of size 2**64 - 1: OverflowError from pyarrow in schema._named",
     _schema_text({"name": "a", "type": {"type": "fixed", "name": "f", "size": (1 << 64) - 1}})),
    ("avro-schema-text", "a decimal of precision 0: ValueError from pyarrow (precision out of range)",
     _schema_text({"name": "a", "type": {"type": "bytes", "logicalType": "decimal", "precision": 0}})),
    ("avro-schema-text", "a union whose one member is an empty union ([[]]): ValueError (a null type field may "
                         "not be non-nullable) from pyarrow",
     _schema_text({"name": "a", "type": [[]]})),
    ("avro-schema-text", "an unknown type name holding a line break: a RecordError of two lines",
     _schema_text({"name": "a", "type": "x\ny"})),
    ("avro-schema-text", "a field name of 2000 characters given twice: a RecordError of 2000 characters",
     _schema_text({"name": _LONG_NAME, "type": "int"}, {"name": _LONG_NAME, "type": "int"})),
    ("avro-schema-text", "JSON nested 100000 deep: RecursionError from Python's JSON parser",
     b"[" * 100_000),
    ("avro-schema-text", "arrays nested 600 deep: RecursionError in schema._AvroToArrow.convert",
     deep_schema(600, "array")),
    ("avro-schema-text", "a record named '\\ud800' (a lone surrogate), not validated: UnicodeEncodeError",
     b'{"type":"record","name":"\\ud800","fields":[]}'),
    ("avro-schema-text", "arrays nested 150 deep read where the field is missing: a SchemaMismatchError quoting "
                         "ARRAY[ 150 times (1095 characters)",
     deep_schema(150, "array")),
    ("record-path", "'³' (a digit to str.isdigit, not to int): ValueError in the parser's _number", "³"),
    ("record-path", "a path with a line break: a RecordPathError of two lines quoting it",
     "unescapeJson(es\napeJson(/), 'true', 'true')"),
    ("record-path", "an unknown function of 1000 characters: a RecordPathError of 1093 characters",
     "x" * 1000 + "()"),
    ("record-path", "arrayOf( 2000 deep: RecursionError in the parser", "arrayOf(" * 2000 + "/name" + ")" * 2000),
    ("record-path", "uuid5 given a namespace of 1000 characters: a RecordPathError of 1138 characters quoting it",
     "uuid5(/name, '" + "a" * 1000 + "')"),
    ("lookup-csv-file", "a header holding NEL (\\x85 in Latin-1): a ServiceEnableError of two lines listing it",
     ("simple", {"CSV Format": "Default Format", "Character Set": "ISO-8859-1", "Lookup Key Column": "x",
                 "Lookup Value Column": "y"}, b"a\x85b\n")),
    ("json-records", "a schema name (from the FlowFile) holding a line break: a SchemaNotFoundError of two lines "
                     "from the registry",
     (_BY_NAME, {"schema.name": "a\nb"}, b"[]", False)),
    ("parquet-records", "a footer whose list column's repetition type was changed (its level histograms no longer "
                        "fit): pyarrow's C++ throws where nothing catches it reading the column chunk's metadata "
                        "(parquet._row_groups: group.column(c)) and the process aborts (std::terminate, SIGABRT); "
                        "iter_batches alone raises OSError",
     ({}, _parquet({"l": [[1, None]]}, store_schema=False).replace(b"\x35\x02\x18\x01l", b"\x33\x02\x18\x01l", 1),
      False)),
    ("parquet-records", "the same footer read with a file range (parquet.file.range.*): the row groups were chosen "
                        "from pyarrow's column chunk metadata, the same abort",
     ({"parquet.file.range.startOffset": "0"}, _parquet({"l": [[1, None]]}, store_schema=False).replace(
         b"\x35\x02\x18\x01l", b"\x33\x02\x18\x01l", 1), False)),
    ("json-records", "a string value that is not UTF-8 ('\\xff'): the batch's string array is not valid UTF-8 "
                     "(pyarrow's JSON parser does not check it; orjson's fallback does)",
     ({}, {}, b'[{"a":"\xff"}]', False)),
    ("json-records", "a key that is not UTF-8, schema inferred: UnicodeDecodeError in json._infer",
     ({}, {}, b'[{"a\xff":1}]', False)),
    ("json-records", "a date value that is not UTF-8, schema given: UnicodeDecodeError in textual._epoch_or_iso",
     (_DATE_FIELD, {}, b'[{"d":"2017-\xa90-20"}]', False)),
    ("json-records", "objects nested 400 deep: RecursionError in json._has_stamp (Jackson refuses past 1000 "
                     "levels with an error)",
     ({}, {}, b'[{"d":' + b'{"a":' * 400 + b"1" + b"}" * 400 + b"}]", False)),
    ("parquet-records", "record.count 99999999999999999999999: OverflowError in parquet.batches (batch.slice)",
     ({"record.offset": "0", "record.count": "9" * 23}, _parquet({"s": ["abc"]}), False)),
    ("parquet-records", "a string value that is not UTF-8: the batch's string array is not valid UTF-8 (pyarrow "
                        "does not check Parquet's strings)",
     ({}, _parquet({"s": ["abc"]}, compression="none", use_dictionary=False, write_statistics=False,
                   store_schema=False).replace(b"abc", b"a\xffc"), False)),
    ("parquet-records", "a column name that is not UTF-8: UnicodeDecodeError from pyarrow's schema_arrow in "
                        "parquet.__init__",
     ({}, _parquet({"colname": [1]}, store_schema=False).replace(b"colname", b"col\xffame"), False)),
    ("csv-records", "Character Set UTF-16 and a content without a byte order mark: UnicodeError (not "
                    "UnicodeDecodeError, so not caught) from the codec",
     ({"Character Set": "UTF-16"}, b"a,b\n1,2\n", False)),
    ("csv-records", "a timestamp column holding 9223372036854775808 (past a long): ArrowInvalid in "
                    "textual._epoch_or_iso",
     (_TIMESTAMP_COLUMN, b"a\n9223372036854775808\n", False)),
    ("csv-records", "a date column holding 9007199254740993 (milliseconds past 2**53): ArrowInvalid (not in range) "
                    "in textual.from_millis",
     ({**_TIMESTAMP_COLUMN, "Schema Text": _schema_text({"name": "a", "type": ["null", {
         "type": "int", "logicalType": "date"}]}).decode()}, b"a\n9007199254740993\n", False)),
    ("avro-schema-text", "a map of maps that is null (the field missing), read by JsonTreeReader: TypeError (mask "
                         "must be boolean) in textual.values_as",
     _schema_text({"name": "m", "type": {"type": "map", "values": {"type": "map", "values": "int"}}})),
    ("xml-records", "a date value holding NEL (U+0085) that is not a date: textual._scalars_as quotes it with "
                    "orjson, which leaves NEL and U+2028 as they are: a SchemaMismatchError of two lines",
     (({"Expect Records as Array": "true", "Schema Access Strategy": "Use 'Schema Text' Property",
        "Date Format": "yyyy-MM-dd", "Schema Text": _schema_text({"name": "when", "type": [
            "null", {"type": "int", "logicalType": "date"}]}).decode()}, {}),
      "<r><e><when>a\u0085b</when></e></r>".encode(), False)),
    ("avro-records", "datums of a given schema whose int field holds -2**63 (a long's varint): ArrowInvalid in "
                     "avro._Rows.batch, raised from _DatumReader.batches' last batch, which is outside its try (a "
                     "bytes decimal wider than its precision, b'\\x04\\x7f\\xff' for precision 2, goes the same way)",
     ({"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": _schema_text(
         {"name": "id", "type": "int"}).decode()}, b"\xff" * 9 + b"\x01", False)),
    ("avro-records", "a container (read with a schema given) whose embedded schema's name holds U+2028: "
                     "avro._check_embedded quotes the embedded schema raw, a message of two lines",
     ({"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": _schema_text(
         {"name": "id", "type": "int"}).decode()},
      with_header(container_file(orjson.loads(_schema_text({"name": "id", "type": "int"})), [{"id": 1}], "null", 16000),
                  _schema_text({"name": "id", "type": "int"}).decode().replace('"name":"r"', '"name":"a\u2028b"'),
                  "null"), False)),
    ("avro-records", "a container whose header's schema is not valid: fastavro's message quotes the whole schema "
                     "(avro._ContainerReader: 'the content is not an Avro data file: {...}', 1289 characters)",
     ({}, with_header(container_file(orjson.loads(_schema_text({"name": "id", "type": "int"})), [{"id": 1}],
                                     "null", 16000),
                      orjson.dumps({"type": "x", "name": "r", "doc": "d" * 1200, "fields": []}).decode(), "null"),
      False)),
]

#: (target, the finding, the example): in readers another area owns (json.py, csv.py, parquet.py, textual.py,
#: sdk/records/access.py, sdk/expression/), each kept until its reader is fixed
OPEN_RECORD_FINDINGS = [
]


@pytest.mark.parametrize("fmt, finding, example", [
    *[pytest.param(fmt, finding, example, id=f"{fmt}-{number}") for number, (fmt, finding, example) in
      enumerate(RECORD_FINDINGS)],
    *[pytest.param(fmt, finding, example, id=f"{fmt}-open-{number}",
                   marks=pytest.mark.xfail(strict=True, raises=Finding, reason=finding))
      for number, (fmt, finding, example) in enumerate(OPEN_RECORD_FINDINGS)]])
def test_record_reader_handles_what_the_fuzzer_found(fmt: str, finding: str, example, tmp_path: Path) -> None:
    """Each was a finding (``finding`` says what the reader did); now a whole read or the reader's
    documented error, in one clear line."""
    check(FORMATS[fmt], tmp_path, example, cpu_seconds=5)
