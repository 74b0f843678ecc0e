"""A damaged provenance event file (issue 50): the reads go around its damaged blocks and name them,
``flowactors provenance repair`` drops them and keeps the rest, a run warns and goes on.

Real files in tmp_path, real LMDB, the command line in this process; no Ray (the run uses the
in-process engine). The repository holds one event file of four blocks; the damage is done to the
middle block (the second) or the last one: cut short (the file truncated inside it, so every block
from it on is gone) or one byte of its compressed data flipped (it alone fails its checksum).
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from flowactors import Flow
from flowactors.cli.main import main
from flowactors.processors import GetFile
from repositories.provenance import ProvenanceEvent, ProvenanceEventType, ProvenanceFormatError
from repositories.provenance import WriteAheadProvenanceRepository as Repository
from repositories.provenance.eventfile import BLOCK_HEADER_SIZE, TableOfContents
from tests.cli_helpers import run_cli as cli

T = ProvenanceEventType
BASE_MS = 1_700_000_000_000
CHILDREN = [f"child-{k}" for k in range(30)]
CHILD_EVENTS = (T.ATTRIBUTES_MODIFIED, T.CONTENT_MODIFIED, T.ROUTE, T.SEND, T.DROP)
WARNING = "flowactors: warning: provenance: "


def build(repository: Path) -> list[ProvenanceEvent]:
    """A stopped flow's provenance: ``root`` made and split into 30 children (one commit), then
    each child's five events (a commit each), merged into one event file of four blocks."""
    repo = Repository(repository / "provenance", block_size=4096, journal_count=1)
    events = [ProvenanceEvent(event_type=T.CREATE, flowfile_uuid="root", timestamp=BASE_MS, component_id="f/gen",
                              component_name="gen", updated_attributes={"filename": "root.txt"}),
              ProvenanceEvent(event_type=T.FORK, flowfile_uuid="root", timestamp=BASE_MS + 1, component_id="f/split",
                              component_name="split", child_uuids=CHILDREN,
                              updated_attributes={"filename": "root.txt"})]
    repo.register(events)
    for k, child in enumerate(CHILDREN):
        mine = [ProvenanceEvent(event_type=t, flowfile_uuid=child, timestamp=BASE_MS + 10 + k, component_id="f/p",
                                component_name="p", updated_attributes={"filename": f"file-{k}.txt", "n": str(i)})
                for i, t in enumerate(CHILD_EVENTS)]
        repo.register(mine)
        events += mine
    repo.rollover()
    repo.close()
    assert len(toc(repository).block_offsets) == 4
    return events


def prov(repository: Path) -> Path:
    return repository / "provenance" / "default" / "0.prov"


def toc(repository: Path) -> TableOfContents:
    return TableOfContents.read(repository / "provenance" / "default" / "0.toc")


def damage(repository: Path, how: str, which: str) -> tuple[int, set[int]]:
    """Damage the middle or last block; returns its offset and the ids that cannot be read."""
    contents = toc(repository)
    index = 1 if which == "middle" else 3
    offset = contents.block_offsets[index]
    data = bytearray(prov(repository).read_bytes())
    if how == "cut":
        os.truncate(prov(repository), offset + BLOCK_HEADER_SIZE + 10)
        return offset, set(range(contents.block_first_ids[index], contents.last_id + 1))
    clen = struct.unpack_from("<I", data, offset)[0]
    data[offset + BLOCK_HEADER_SIZE + clen // 2] ^= 0xFF
    prov(repository).write_bytes(bytes(data))
    firsts = contents.block_first_ids
    last = firsts[index + 1] - 1 if index + 1 < len(firsts) else contents.last_id
    return offset, set(range(firsts[index], last + 1))


DAMAGE = pytest.mark.parametrize("how, which", [("cut", "middle"), ("cut", "last"), ("flip", "middle"),
                                                ("flip", "last")])
PROBLEM = {"cut": "is cut short", "flip": "fails its checksum"}


@DAMAGE
def test_search_events_get_and_lineage_read_around_a_damaged_block(tmp_path, how, which):
    events = build(tmp_path)
    offset, lost = damage(tmp_path, how, which)
    intact = [e.event_id for e in events if e.event_id not in lost]
    for readonly in (True, False):
        with Repository(tmp_path / "provenance", readonly=readonly) as repo:
            assert sorted(e.event_id for e in repo.search(limit=None)) == intact
            assert [e.event_id for e in repo.search(limit=5)] == sorted(intact, reverse=True)[:5]
            assert [e.event_id for e in repo.events(0, 1000)] == intact
            assert repo.get(intact[-1]).event_id == intact[-1]
            with pytest.raises(ProvenanceFormatError, match=rf"provenance event {min(lost)} cannot be read: "
                                                            rf"{prov(tmp_path)}: block at offset {offset} "
                                                            rf"{PROBLEM[how]}.*flowactors provenance repair"):
                repo.get(min(lost))
            lineage = repo.lineage("root")
            assert {e.event_id for e in lineage.events} == set(intact)
            assert lineage.unreadable == sorted(lost)
            [first] = [b for b in repo.damaged_blocks() if b.offset == offset]
            assert first.path == str(prov(tmp_path)) and PROBLEM[how] in first.problem
            assert repo.stats()["damaged_blocks"] == len(repo.damaged_blocks())


@DAMAGE
def test_search_show_and_lineage_name_the_damage_in_one_warning_line(tmp_path, capsys, how, which):
    events = build(tmp_path)
    offset, lost = damage(tmp_path, how, which)
    intact = [e.event_id for e in events if e.event_id not in lost]
    repo = ["--repository", str(tmp_path)]

    status, out, err = cli(capsys, "provenance", "search", "--json", "--limit", "1000", *repo)
    assert status == 0 and sorted(e["event_id"] for e in json.loads(out)) == intact
    [line] = err.splitlines()
    assert line.startswith(WARNING) and f"{prov(tmp_path)}: block at offset {offset} " in line
    assert PROBLEM[how] in line and f"{len(lost)} events asked for are in them" in line
    assert f"run 'flowactors provenance repair --repository {tmp_path}'" in line

    status, out, err = cli(capsys, "provenance", "show", str(intact[0]), *repo)
    assert status == 0 and out.startswith(f"event {intact[0]}: CREATE")
    if how == "cut":   # found at open; a flipped byte only by a read of its block (or by repair)
        [line] = err.splitlines()
        assert line.startswith(WARNING) and f"block at offset {offset}" in line
    else:
        assert err == ""

    status, out, err = cli(capsys, "provenance", "show", str(min(lost)), *repo)
    assert status == 1 and out == ""
    [line] = err.splitlines()
    assert line.startswith(f"flowactors: provenance event {min(lost)} cannot be read: {prov(tmp_path)}: block at "
                           f"offset {offset} ")
    assert "flowactors provenance repair" in line

    status, out, err = cli(capsys, "lineage", "root", *repo)
    assert status == 0 and out.startswith("FlowFile root\n")
    [line] = err.splitlines()
    assert line.startswith(WARNING) and f"{len(lost)} events asked for are in them" in line


@DAMAGE
def test_repair_drops_the_damaged_blocks_keeps_the_rest_and_fixes_the_index(tmp_path, capsys, how, which):
    events = build(tmp_path)
    offset, lost = damage(tmp_path, how, which)
    intact = [e.event_id for e in events if e.event_id not in lost]
    repo = ["--repository", str(tmp_path)]

    status, out, err = cli(capsys, "provenance", "repair", *repo)
    assert status == 1
    lines = out.splitlines()
    assert lines[0].startswith(f"  {prov(tmp_path)}: block at offset {offset} ") and PROBLEM[how] in lines[0]
    assert f"; {len(lost)} events lost, {len(intact)} kept; the index no longer points into the dropped blocks" \
        in lines[0]
    assert lines[-1] == (f"provenance in {tmp_path}: 1 damaged event file repaired: {len(lost)} events lost, "
                         f"{len(intact)} kept; search, show and lineage read them without warnings now")

    status, out, err = cli(capsys, "provenance", "search", "--json", "--limit", "1000", *repo)
    assert status == 0 and err == "" and sorted(e["event_id"] for e in json.loads(out)) == intact
    lost_child = next(e.flowfile_uuid for e in events if e.event_id in lost and e.flowfile_uuid != "root")
    status, out, err = cli(capsys, "provenance", "search", "--uuid", lost_child, *repo)
    assert (status, err) == (0, "")   # the index no longer points into the dropped blocks
    status, out, err = cli(capsys, "lineage", "root", *repo)
    assert (status, err) == (0, "")
    status, out, err = cli(capsys, "provenance", "show", str(min(lost)), *repo)
    assert status == 2 and f"no provenance event {min(lost)}" in err   # gone, no longer damaged
    with Repository(tmp_path / "provenance", readonly=True) as provenance:
        assert [e.event_id for e in provenance.events(0, 1000)] == intact
        assert provenance.damaged_blocks() == [] and provenance.recovery["problems"] == []
    if which == "last" or how == "cut":   # nothing is kept after the last intact block
        assert prov(tmp_path).stat().st_size == toc(tmp_path).block_offsets[-1] + _block_bytes(tmp_path, -1)

    status, out, err = cli(capsys, "provenance", "repair", *repo)
    assert status == 0 and out.splitlines()[-1].startswith(f"provenance in {tmp_path}: intact")


def _block_bytes(repository: Path, index: int) -> int:
    offset = toc(repository).block_offsets[index]
    return BLOCK_HEADER_SIZE + struct.unpack_from("<I", prov(repository).read_bytes(), offset)[0]


def test_a_lost_table_of_contents_is_rebuilt_around_a_damaged_block_and_repair_writes_it(tmp_path, capsys):
    events = build(tmp_path)
    offset, lost = damage(tmp_path, "flip", "middle")
    (tmp_path / "provenance" / "default" / "0.toc").unlink()
    intact = [e.event_id for e in events if e.event_id not in lost]
    for readonly in (True, False):
        with Repository(tmp_path / "provenance", readonly=readonly) as repo:
            assert [e.event_id for e in repo.events(0, 1000)] == intact
            assert sorted(e.event_id for e in repo.search(limit=None)) == intact
            [block] = repo.damaged_blocks()
            assert (block.offset, block.first_id, block.last_id) == (offset, min(lost), max(lost))
        assert not (tmp_path / "provenance" / "default" / "0.toc").exists()   # written once repaired
    status, out, _ = cli(capsys, "provenance", "repair", "--repository", str(tmp_path))
    assert status == 1 and f"block at offset {offset} (events {min(lost)}-{max(lost)}) fails its checksum" in out
    assert toc(tmp_path).event_count == len(intact)
    status, out, err = cli(capsys, "provenance", "search", "--json", "--limit", "1000", "--repository", str(tmp_path))
    assert status == 0 and err == "" and sorted(e["event_id"] for e in json.loads(out)) == intact


def test_a_damaged_file_header_loses_no_event_once_repair_rewrote_it(tmp_path, capsys):
    events = build(tmp_path)
    with open(prov(tmp_path), "r+b") as file:
        file.write(b"X")                          # the magic
    repo = ["--repository", str(tmp_path)]
    status, out, err = cli(capsys, "provenance", "search", *repo)
    assert (status, out) == (0, "no events match\n")
    assert err.startswith(WARNING) and "header (events 0-151): not a provenance event file" in err
    status, out, _ = cli(capsys, "provenance", "repair", *repo)
    assert status == 1 and f"header: not a provenance event file (magic b'XAPE'), rewritten; nothing lost, " \
                           f"{len(events)} events kept" in out
    status, out, err = cli(capsys, "provenance", "search", "--json", "--limit", "1000", *repo)
    assert status == 0 and err == "" and len(json.loads(out)) == len(events)


@pytest.mark.parametrize("how, which", [("cut", "middle"), ("cut", "last"), ("length", "middle")])
def test_a_run_on_a_damaged_event_file_warns_once_naming_it_and_goes_on(tmp_path, capsys, how, which):
    """The start finds a file cut short or a block length that runs into the next block (one
    32-byte read a block: it does not read the blocks' bytes, so a byte flipped inside one is
    found by the read that meets it, or by repair)."""
    repository = tmp_path / "repository"
    build(repository)
    if how == "length":
        offset = toc(repository).block_offsets[1]
        with open(prov(repository), "r+b") as file:
            file.seek(offset + 1)
            file.write(b"\x7f")                  # its compressed length, now past the next block
    else:
        offset, _ = damage(repository, how, which)
    (tmp_path / "in").mkdir()
    flow = Flow("warned")
    flow.add(GetFile, "get", properties={"Input Directory": str(tmp_path / "in")}, auto_terminate=["success"])
    flow.save(tmp_path / "flow.json")
    status, _, err = cli(capsys, "run", str(tmp_path / "flow.json"), "--engine", "in-process", "--repository",
                         str(repository), "--quiet")
    assert status == 0
    warnings = [line for line in err.splitlines() if str(prov(repository)) in line]
    assert len(warnings) == 1, err
    assert warnings[0].startswith(f"flowactors: warning: provenance recovery: {prov(repository)}: block at offset "
                                  f"{offset} ")
    assert f"run 'flowactors provenance repair --repository {repository}'" in warnings[0]


def test_an_event_file_with_no_block_that_reads_and_no_table_of_contents_is_named_and_repair_deletes_it(
        tmp_path, capsys):
    build(tmp_path)
    os.truncate(prov(tmp_path), 10)
    (tmp_path / "provenance" / "default" / "0.toc").unlink()
    repo = ["--repository", str(tmp_path)]
    status, out, err = cli(capsys, "provenance", "search", *repo)
    assert (status, out) == (0, "no events match\n")
    [line] = err.splitlines()
    assert line.startswith(WARNING) and f"{prov(tmp_path)}: header (events from 0): event file header is cut " \
                                        f"short, and its table of contents is lost" in line
    status, out, _ = cli(capsys, "provenance", "repair", *repo)
    assert status == 1 and "no block of it reads: the file is deleted, its events are lost" in out
    assert not prov(tmp_path).exists()
    status, out, err = cli(capsys, "provenance", "repair", *repo)
    assert status == 0 and err == "" and "intact" in out


def test_a_batch_sent_again_whose_ids_lie_in_a_damaged_block_is_not_written_twice(tmp_path):
    """A flow's batch whose answer was lost is sent again; its ids were merged into a block that
    is damaged since: it was written, so it is dropped (not refused as late, and no error)."""
    from repositories.provenance.event import encode_batch, event_fields

    events = build(tmp_path)
    _, lost = damage(tmp_path, "flip", "middle")
    again = encode_batch([event_fields(e) for e in events if e.event_id in lost][:5])
    with Repository(tmp_path / "provenance") as repo:
        assert repo.register_numbered([(min(lost), again)]) == []
        assert repo.stats()["next_event_id"] == len(events)


def test_the_warning_comes_as_the_run_starts_not_when_it_ends(tmp_path):
    """A long-running flow says so at its start: ``on_warning`` is called before the run's first
    look at the flow's status."""
    from flowactors.driver.running import run_flow

    repository = tmp_path / "repository"
    build(repository)
    os.truncate(prov(repository), os.path.getsize(prov(repository)) - 10)
    (tmp_path / "in").mkdir()
    flow = Flow("warned-early")
    flow.add(GetFile, "get", properties={"Input Directory": str(tmp_path / "in")}, auto_terminate=["success"])
    warned: list[str] = []
    known_at_each_look: list[int] = []
    run_flow(flow, repository, engine="in-process", on_warning=warned.append,
             until=lambda status: known_at_each_look.append(len(warned)) or True)  # the first look ends it
    assert len(warned) == 1 and warned[0].startswith(f"provenance recovery: {prov(repository)}: ")
    assert known_at_each_look == [1]
