"""``flowactors provenance search|show`` and ``flowactors lineage`` on the repository of a real run.

The flow (tests/provenance_flows.py) splits a 3-line file, clones each split and merges them, on
real Ray; the commands then read its provenance, content and lineage after it stopped.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pytest

from flowactors import Flow
from flowactors.cli.main import main
from flowactors.driver.running import run_flow
from flowactors.ops.lineage_view import condense, to_text
from flowactors.processors import GetFile
from flowactors.sdk.settings import Settings
from provenance_flows import LETTERS, all_events, only, split_merge_clone_flow
from repositories.provenance import WriteAheadProvenanceRepository
from tests.cli_helpers import run_cli as cli

pytestmark = pytest.mark.ray
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def ran(ray_session, tmp_path_factory):
    """The repository of one run of the split/clone/merge flow and its events (oldest first)."""
    repository = tmp_path_factory.mktemp("provenance-cli") / "repository"
    run_flow(split_merge_clone_flow(), repository, timeout=60)
    return repository, all_events(repository)


def utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_search_prints_a_table_newest_first(ran, capsys):
    repository, events = ran
    status, out, _ = cli(capsys, "provenance", "search", "--repository", str(repository))
    assert status == 0
    lines = out.splitlines()
    assert lines[0].split() == ["id", "time", "(UTC)", "type", "component", "uuid", "filename", "size"]
    assert [line.split() for line in lines[1:-1]] == [
        [str(e.event_id), utc(e.timestamp), e.event_type.value, e.component_name, e.flowfile_uuid,
         e.filename, str(e.updated_size)] for e in reversed(events)]
    assert lines[-1] == f"{len(events)} event(s), newest first"


def test_search_filters(ran, capsys):
    repository, events = ran
    repo = ["--repository", str(repository)]
    join = only(events, event_type="JOIN")

    def ids(*args: str) -> list[int]:
        status, out, err = cli(capsys, "provenance", "search", *repo, *args)
        assert status == 0, err
        return [] if out.startswith("no events match") else [int(line.split()[0]) for line in out.splitlines()[1:-1]]

    clones = [e.event_id for e in reversed(events) if e.event_type.value == "CLONE"]
    assert ids("--type", "clone", "--component", "fan") == clones
    assert ids("--component-id", "lineage-test/fan") == clones
    assert ids("--uuid", join.flowfile_uuid) == [only(events, event_type="DROP", flowfile_uuid=join.flowfile_uuid)
                                                 .event_id, join.event_id]
    assert ids("--relationship", "success") == []
    assert ids("--filename", "letters.txt", "--type", "JOIN") == [join.event_id]
    assert ids("--min-size", "14 B", "--max-size", "14") == [e.event_id for e in reversed(events)
                                                            if e.updated_size == 14]
    latest = max(e.timestamp for e in events)   # ids follow commit order, not event time
    assert ids("--since", "2000-01-01T00:00:00Z", "--until", str(latest)) == [e.event_id for e in reversed(events)]
    assert ids("--since", str(latest + 1)) == []
    status, out, _ = cli(capsys, "provenance", "search", *repo, "--limit", "2")
    assert len(out.splitlines()) == 4 and out.splitlines()[-1] == "2 event(s), newest first; more match: raise --limit"
    status, out, _ = cli(capsys, "provenance", "search", *repo, "--type", "JOIN", "--json")
    [data] = json.loads(out)
    assert (data["event_id"], data["event_type"], data["parent_uuids"]) == (join.event_id, "JOIN", join.parent_uuids)


def test_search_mistakes_are_one_line_errors(ran, capsys, tmp_path):
    repository, _ = ran
    status, _, err = cli(capsys, "provenance", "search", "--repository", str(repository), "--attribute", "colour=red")
    assert status == 2
    assert err.startswith("flowactors: attributes ['colour'] are not indexed") and "Traceback" not in err
    status, _, err = cli(capsys, "provenance", "search", "--repository", str(tmp_path / "nothing"))
    assert status == 2 and f"no provenance repository in {tmp_path / 'nothing'}" in err
    for bad, message in ((["--type", "NOPE"], "'NOPE' is not one of CREATE, RECEIVE"),
                         (["--since", "yesterday"], "'yesterday' is not a time: give ISO 8601"),
                         (["--min-size", "big"], "'big' is not a data size")):
        status, _, err = cli(capsys, "provenance", "search", "--repository", str(repository), *bad)
        assert status == 2 and err.startswith(f"flowactors: Invalid value for '{bad[0]}': {message}")
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_show_prints_every_field_and_the_attribute_changes(ran, capsys):
    repository, events = ran
    fork = only(events, event_type="FORK")
    status, out, _ = cli(capsys, "provenance", "show", str(fork.event_id), "--repository", str(repository))
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == f"event {fork.event_id}: FORK"
    fields = {line[2:19].strip(): line[20:] for line in lines[1:16]}
    assert fields["component"] == "split (SplitText, id lineage-test/split)"
    assert fields["FlowFile"] == fork.flowfile_uuid and fields["children"] == ", ".join(fork.child_uuids)
    assert fields["source queue"] == "generate.success.split"
    assert fields["time"] == f"{utc(fork.timestamp)} ({fork.timestamp})"
    claim = fork.previous_claim
    assert fields["input content"] == (f"17 bytes, available (archived) (claim {claim.resource.container}/"
                                       f"{claim.resource.section}/{claim.resource.id} at {claim.offset})")
    assert lines[16] == "attributes (before -> after; + added, - removed, ~ changed):"
    changes = {line[4:].split()[0]: line[:3] for line in lines[17:]}
    assert changes == {"fragment.count": "  +", "fragment.identifier": "  +", "segment.original.filename": "  +",
                       "filename": "   ", "path": "   ", "uuid": "   "}
    assert f"    {'filename':<25}  letters.txt" in lines   # unchanged: unmarked, names aligned


def test_show_writes_past_content(ran, capsysbinary, tmp_path):
    repository, events = ran
    fork, join = only(events, event_type="FORK"), only(events, event_type="JOIN")
    repo = ["--repository", str(repository)]
    assert main(["provenance", "show", str(fork.event_id), "--content", "input", *repo]) == 0
    assert capsysbinary.readouterr().out == LETTERS.encode()
    assert main(["provenance", "show", str(join.event_id), "--content", "output", *repo]) == 0
    merged = capsysbinary.readouterr().out
    assert sorted(merged.decode()) == sorted("alphabetagamma") and len(merged) == 14
    target = tmp_path / "merged.bin"
    assert main(["provenance", "show", str(join.event_id), "--content", "output", "--out", str(target), *repo]) == 0
    assert target.read_bytes() == merged
    assert f"wrote 14 bytes, the output content of event {join.event_id}, to {target}" in \
        capsysbinary.readouterr().err.decode()
    assert main(["provenance", "show", str(join.event_id), "--content", "input", *repo]) == 1
    assert b"has no input: the FlowFile was created by it" in capsysbinary.readouterr().err
    assert main(["provenance", "show", "999999", *repo]) == 2
    assert f"no provenance event 999999 in {repository}: the newest event is {events[-1].event_id}".encode() in \
        capsysbinary.readouterr().err


def test_show_json(ran, capsys):
    repository, events = ran
    join = only(events, event_type="JOIN")
    status, out, _ = cli(capsys, "provenance", "show", str(join.event_id), "--json", "--repository", str(repository))
    data = json.loads(out)
    assert data["event_type"] == "JOIN" and data["content_available"] == {"input": "none", "output": "archived"}
    assert {c["name"] for c in data["attribute_changes"]} == set(join.updated_attributes)


def test_lineage_prints_a_tree_and_draws_it(ran, capsys, tmp_path):
    repository, events = ran
    original = only(events, event_type="CREATE").flowfile_uuid
    with WriteAheadProvenanceRepository(repository / "provenance") as provenance:
        lineage = provenance.lineage(original)
    view = condense(lineage, original)   # a small family: nothing to group, every node shown
    assert not view.groups and len(view.nodes) == len(lineage.nodes) == 22
    svg, dot = tmp_path / "lineage.svg", tmp_path / "lineage.dot"
    status, out, err = cli(capsys, "lineage", original, "--repository", str(repository), "--output", str(svg))
    assert status == 0 and out == to_text(view) + "\n"
    assert original in out.splitlines()[0]   # the text starts at the FlowFile asked for
    assert err.strip() == f"lineage of {original}: 22 of 22 nodes drawn to {svg}"
    root = ET.parse(svg).getroot()
    assert root.tag == f"{SVG}svg"
    nodes = [g for g in root.iter(f"{SVG}g") if g.get("class", "").startswith("node ")]
    edges = [g for g in root.iter(f"{SVG}g") if g.get("class") == "edge"]
    assert sorted(g.get("data-node") for g in nodes) == sorted(n.id for n in lineage.nodes)
    assert len(nodes) == 22 and len(edges) == 23
    assert sorted((g.get("data-source"), g.get("data-target")) for g in edges) == \
        sorted((e.source, e.target) for e in lineage.edges)
    status, out, _ = cli(capsys, "lineage", original, "--repository", str(repository), "--json")
    assert status == 0 and json.loads(out) == json.loads(json.dumps(view.to_dict()))
    assert sum(g.get("class") == "node flowfile" for g in nodes) == 8
    assert cli(capsys, "lineage", original, "--repository", str(repository), "--output", str(dot))[0] == 0
    assert dot.read_text().startswith("digraph lineage {") and dot.read_text().count(" -> ") == 23
    png = tmp_path / "lineage.png"   # resvg-py, a dependency, draws it
    assert cli(capsys, "lineage", original, "--repository", str(repository), "--output", str(png))[0] == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_lineage_mistakes(ran, capsys, tmp_path):
    repository, _ = ran
    status, _, err = cli(capsys, "lineage", "no-such-uuid", "--repository", str(repository))
    assert status == 2 and "no provenance events name FlowFile no-such-uuid" in err
    status, out, err = cli(capsys, "lineage", "x", "--repository", str(repository), "--output", "lineage.txt")
    assert status == 2 and not out
    assert err == "flowactors: cannot draw a lineage as 'lineage.txt': the file name must end in one of .svg, .dot, .png\n"


def test_lineage_says_before_any_work_that_png_needs_its_renderer(ran, capsys, tmp_path, monkeypatch):
    from flowactors.ops import png

    repository, events = ran
    monkeypatch.setattr(png, "PNG_PACKAGE", "resvg_py_not_installed")
    picture = tmp_path / "lineage.png"
    status, out, err = cli(capsys, "lineage", events[0].flowfile_uuid, "--repository", str(repository),
                           "--output", str(picture))
    assert status == 2 and not out and not picture.exists()   # nothing printed, nothing drawn
    assert err.startswith("flowactors: writing a .png picture needs the Python package resvg-py")


def _damaged_journals(root: Path) -> int:
    """A provenance repository left with journals (as after a crash), one of them cut in half;
    returns how many events were registered."""
    from repositories.provenance import ProvenanceEvent, ProvenanceEventType
    from repositories.provenance import WriteAheadProvenanceRepository as Repository

    repo = Repository.from_settings(root, Settings())
    for start in range(0, 400, 10):
        repo.register([ProvenanceEvent(event_type=ProvenanceEventType.CREATE, flowfile_uuid=f"ff-{i}",
                                       timestamp=1_700_000_000_000 + i, component_id="c", component_name="P")
                       for i in range(start, start + 10)])
    repo.close()  # no rollover: the journals stay, as after kill -9
    journal = sorted((root / "provenance" / "default" / "journals").iterdir())[0]
    os.truncate(journal, journal.stat().st_size // 2)
    return 400


def test_repair_names_the_damaged_journal_and_counts_what_it_lost(tmp_path, capsys):
    root = tmp_path / "repository"
    _damaged_journals(root)
    assert main(["provenance", "repair", "--repository", str(root)]) == 1
    out = capsys.readouterr().out
    assert ".journal: " in out and "bytes cut at the end" in out
    assert re.search(r"events read from journals and kept; \d+ could not be read", out)
    assert main(["provenance", "repair", "--repository", str(root)]) == 0  # what was readable is kept
    assert "intact" in capsys.readouterr().out


def test_repair_takes_the_events_a_killed_run_left_in_the_logs_outbox(tmp_path, capsys):
    """Commits whose events provenance had not taken when the run was killed: their events wait in
    the FlowFile repository's outbox, so a search does not show them yet; repair (as the next
    start would) takes them under the ids their commits reserved, and empties the outbox."""
    from flowactors.engine.log_writer import LogWriter
    from flowactors.sdk.session_contract import CommitBatch
    from repositories.flowfile import WriteAheadFlowFileRepository
    from repositories.model import FlowFile, QueuedFlowFile, new_flowfile_uuid, now_millis
    from repositories.provenance.event import ProvenanceEvent, ProvenanceEventType, event_fields

    root = tmp_path / "repository"
    WriteAheadProvenanceRepository(root / "provenance").close()
    wal = WriteAheadFlowFileRepository(root / "flowfile")
    log = LogWriter(wal, True)
    uuids = [new_flowfile_uuid() for _ in range(3)]
    now = now_millis()
    for n, uuid in enumerate(uuids):
        ff = FlowFile(n, uuid, {"filename": f"f{n}"}, None, now, now, queue_date=now, queue_index=n)
        event = ProvenanceEvent(event_type=ProvenanceEventType.CREATE, timestamp=now, flowfile_uuid=uuid,
                                component_id="killed/gen", component_name="gen", component_type="T",
                                updated_attributes=dict(ff.attributes))
        log.record(CommitBatch(updates=[QueuedFlowFile(ff, "q")], events=[event_fields(event)]))
    log.close()
    wal.close()
    repo = ["--repository", str(root)]
    assert main(["provenance", "search", *repo]) == 0
    assert "no events match" in capsys.readouterr().out
    assert main(["provenance", "repair", *repo]) == 0
    out = capsys.readouterr().out
    assert "3 events of the last commits of a run that did not stop cleanly" in out and "intact" in out
    assert main(["provenance", "search", "--filename", "f1", "--json", *repo]) == 0
    assert [(e["event_id"], e["flowfile_uuid"]) for e in json.loads(capsys.readouterr().out)] == [(1, uuids[1])]
    assert main(["provenance", "search", "--json", *repo]) == 0
    assert sorted(e["event_id"] for e in json.loads(capsys.readouterr().out)) == [0, 1, 2]
    with WriteAheadFlowFileRepository(root / "flowfile") as wal:
        assert wal.stats()["provenance_outbox"] == 0
    assert main(["provenance", "repair", *repo]) == 0  # taken once: nothing again
    assert "outbox" not in capsys.readouterr().out


def test_a_run_on_damaged_provenance_warns_on_stderr(tmp_path, capsys):
    root = tmp_path / "repository"
    _damaged_journals(root)
    (tmp_path / "in").mkdir()
    flow = Flow("warned")
    flow.add(GetFile, "get", properties={"Input Directory": str(tmp_path / "in")}, auto_terminate=["success"])
    flow.save(tmp_path / "flow.json")
    assert main(["run", str(tmp_path / "flow.json"), "--engine", "in-process", "--repository", str(root),
                 "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "flowactors: warning: provenance recovery: " in err and "could not be read" in err
