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

FORMATS = {fmt.name: fmt for fmt in formats()}
#: examples a format in the short run (the slow ones open a whole repository an example)
EXAMPLES = {"wal-log": 100, "provenance-journal": 100, "provenance-event-file": 100, "provenance-index": 100}
DEFAULT_EXAMPLES = 300

@pytest.mark.parametrize("name", sorted(FORMATS))
def test_reader_gives_a_whole_read_or_its_documented_error(name: str, tmp_path: Path) -> None:
    fmt = FORMATS[name]

    @settings(max_examples=EXAMPLES.get(name, DEFAULT_EXAMPLES), derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(fmt.examples(tmp_path))
    def read(example) -> None:
        check(fmt, tmp_path, example)

    read()


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
