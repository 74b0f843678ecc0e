"""Lineage that reads at any size: a real 1,000-line split + merge, viewed from any of its FlowFiles.

The family comes from a real flow (GenerateFlowFile -> SplitText -> MergeContent, bench scenario
13's) on the in-process engine into a real provenance repository; the views, SVG and PNG are
read back and measured (the SVG parsed, the PNG's header read), never compared with a drawing.
"""

from __future__ import annotations

import json
import struct
import xml.etree.ElementTree as ET

import pytest

from bench.lineage import split_merge_flow
from flowactors.driver.running import run_flow
from flowactors.ops import png
from flowactors.ops.lineage_render import RenderError, check_output, to_dot, to_svg, write_picture
from flowactors.ops.lineage_view import condense, to_text
from repositories.provenance import ProvenanceEvent, ProvenanceEventType, WriteAheadProvenanceRepository
from repositories.provenance.lineage import build_lineage

LINES = 1000
SVG = "{http://www.w3.org/2000/svg}"
TITLE_EM = 0.602   # advance of a DejaVu Sans Mono character, in em (1233 / 2048)


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    """The repository's events of one split + merge of LINES lines: CREATE, FORK, JOIN, DROPs."""
    repository = tmp_path_factory.mktemp("lineage") / "repository"
    run_flow(split_merge_flow(LINES), repository, engine="in-process", timeout=120)
    provenance = WriteAheadProvenanceRepository(repository / "provenance")
    events = provenance.events(0, 10 * LINES)
    fork = next(e for e in events if e.event_type == ProvenanceEventType.FORK)
    join = next(e for e in events if e.event_type == ProvenanceEventType.JOIN)
    assert len(fork.child_uuids) == LINES and sorted(join.parent_uuids) == sorted(fork.child_uuids)
    yield provenance, fork, join
    provenance.close()


def members(uuids):
    return {f"flowfile:{u}" for u in uuids}


@pytest.mark.parametrize("who", ["original", "merged", "a split"])
def test_the_text_starts_at_the_flowfile_asked_for_and_stays_short(family, who):
    provenance, fork, join = family
    uuid = {"original": fork.flowfile_uuid, "merged": join.flowfile_uuid, "a split": fork.child_uuids[500]}[who]
    lineage = provenance.lineage(uuid)
    assert len(lineage.nodes) == 2 * LINES + 7
    text = to_text(condense(lineage, uuid))
    lines = text.splitlines()
    assert lines[0] == f"FlowFile {uuid}"
    assert len(lines) <= 25, text
    assert ("… 997 more splits" in text) == (who != "a split")   # a split's siblings are not its family line
    assert lines[-1].startswith(f"(15 of the family's {2 * LINES + 7:,} nodes shown; 2 groups collapse 1,994 nodes")
    ancestors, descendants = text.index("ancestors (nearest first)"), text.index("descendants")
    if who == "original":
        assert "ancestors (nearest first): none" in text
    if who == "merged":   # the JOIN is its nearest ancestor, the splits above it
        assert lines[2] == f"└── #{join.event_id} JOIN by merge"
        assert ancestors < text.index("… 997 more splits") < descendants
    if who == "a split":  # made by the FORK (above), merged by the JOIN (below); its siblings are relatives
        assert ancestors < text.index(f"#{fork.event_id} FORK by split") < descendants < text.index("JOIN by merge")
        assert "4 relatives (neither ancestors nor descendants) only in the picture" in text
        assert text.index("JOIN by merge") < text.index("… 997 more DROP events")


def test_the_groups_are_data_that_a_page_can_expand(family):
    provenance, fork, join = family
    lineage = provenance.lineage(join.flowfile_uuid)
    view = condense(lineage, join.flowfile_uuid)
    data = json.loads(json.dumps(view.to_dict()))
    assert data["focus"] == f"flowfile:{join.flowfile_uuid}" and data["lineage_nodes"] == 2 * LINES + 7
    groups = {n["id"]: n for n in data["nodes"] if n["kind"] == "group"}
    splits = groups[f"group:event:{fork.event_id}/children"]
    assert splits["count"] == 997 and splits["label"] == "… 997 more splits" and splits["relation"] == "ancestor"
    shown = {n["id"] for n in data["nodes"] if n["kind"] == "flowfile"} & members(fork.child_uuids)
    assert len(shown) == 3 and set(splits["members"]) == members(fork.child_uuids) - shown
    drops = groups[f"group:event:{join.event_id}/children"]
    assert drops["label"] == "… 997 more DROP events" and len(drops["members"]) == 997
    assert all(m.startswith("event:") for m in drops["members"]) and drops["relation"] == "relative"
    edges = {(e["source"], e["target"]): e for e in data["edges"]}
    assert edges[(f"event:{fork.event_id}", splits["id"])]["count"] == 997
    assert edges[(splits["id"], f"event:{join.event_id}")] == {
        "source": splits["id"], "target": f"event:{join.event_id}", "flowfile_uuid": None, "count": 997}
    # every lineage node is in view or in exactly one group
    hidden = [m for g in groups.values() for m in g["members"]]
    in_view = [n["id"] for n in data["nodes"] if n["kind"] != "group"]
    assert sorted(hidden + in_view) == sorted(n.id for n in lineage.nodes)

    opened = condense(lineage, join.flowfile_uuid, expand=[splits["id"]])
    assert {n.id for n in opened.nodes} >= members(fork.child_uuids)
    assert [g.id for g in opened.groups] == [drops["id"]]


def test_the_svg_fits_a_page_and_its_title_fits_the_svg(family, tmp_path):
    provenance, fork, join = family
    for uuid in (fork.flowfile_uuid, join.flowfile_uuid, fork.child_uuids[-1]):
        svg = write_picture(provenance.lineage(uuid), tmp_path / "lineage.svg", uuid)
        root = ET.parse(svg).getroot()
        width, height = float(root.get("width")), float(root.get("height"))
        assert width < 2000 and height < 1000
        for title in root.iter(f"{SVG}text"):
            if title.get("class") == "title":
                assert float(title.get("x")) + len(title.text) * float(title.get("font-size")) * TITLE_EM <= width
        group = next(g for g in root.iter(f"{SVG}g") if g.get("data-node") == f"group:event:{fork.event_id}/children")
        assert group.get("class") == "node group" and group.get("data-count") == "997"
        assert group.find(f"{SVG}text").text == "… 997 more splits"
        focus = next(g for g in root.iter(f"{SVG}g") if g.get("data-node") == f"flowfile:{uuid}")
        assert focus.find(f"{SVG}ellipse").get("stroke-width") == "2.5"


def test_a_small_picture_is_as_wide_as_its_title():
    uuid = "01a21757-983c-7531-8c70-b21fe320b60e"
    lineage = build_lineage(uuid, [ProvenanceEvent(event_type=ProvenanceEventType.CREATE, flowfile_uuid=uuid,
                                                   timestamp=1_700_000_000_000, component_id="g", component_name="g")])
    root = ET.fromstring(to_svg(condense(lineage)))
    title = next(t for t in root.iter(f"{SVG}text") if t.get("class") == "title")
    assert title.text == f"Lineage of FlowFile {uuid}"
    assert float(title.get("x")) + len(title.text) * 14 * TITLE_EM <= float(root.get("width"))


def test_png_is_written_by_resvg(family, tmp_path):
    provenance, fork, join = family
    lineage = provenance.lineage(join.flowfile_uuid)
    svg = ET.fromstring(to_svg(condense(lineage)))
    data = write_picture(lineage, tmp_path / "lineage.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    assert struct.unpack(">II", data[16:24]) == (int(svg.get("width")), int(svg.get("height")))
    dot = write_picture(lineage, tmp_path / "lineage.dot").read_text()
    assert dot.startswith("digraph lineage {") and '[shape=box, style=dashed, label="… 997 more splits"]' in dot


def test_an_output_that_cannot_be_written_is_refused_before_any_work(tmp_path, monkeypatch):
    with pytest.raises(RenderError, match=r"cannot draw a lineage as 'l\.txt': the file name must end in one of "
                                          r"\.svg, \.dot, \.png"):
        check_output(tmp_path / "l.txt")
    with pytest.raises(RenderError, match="the folder .*nowhere does not exist"):
        check_output(tmp_path / "nowhere" / "l.svg")
    assert check_output(tmp_path / "l.PNG") == tmp_path / "l.PNG"
    monkeypatch.setattr(png, "PNG_PACKAGE", "resvg_py_not_installed")
    with pytest.raises(RenderError, match=r"writing a \.png picture needs the Python package resvg-py \(pip install "
                                          r"'resvg-py>=0\.5,<0\.6': a wheel, no system library\), which is not "
                                          r"installed; write \.svg instead \(any browser shows it\)"):
        check_output(tmp_path / "l.png")
    assert not list(tmp_path.iterdir())


def test_condense_refuses_settings_that_cannot_group(family):
    provenance, fork, _ = family
    with pytest.raises(ValueError, match="need 1 <= shown <= collapse_over, not shown=0, collapse_over=5"):
        condense(provenance.lineage(fork.flowfile_uuid), shown=0)


def test_the_text_view_of_a_small_family_is_its_whole_tree():
    """A fork and a join (tests/test_provenance_repository.py's history): every node once, the
    JOIN reached a second time said so."""
    from repositories.provenance import InMemoryProvenanceRepository
    from test_provenance_repository import lineage_history

    repo = InMemoryProvenanceRepository()
    repo.register(lineage_history())
    view = condense(repo.lineage("A"))
    assert to_text(view) == "\n".join([
        "FlowFile A",
        "ancestors (nearest first): none",
        "descendants:",
        "└── #0 CREATE by Gen",
        "    └── #1 ATTRIBUTES_MODIFIED by Gen",
        "        └── #3 FORK by Gen",
        "            ├── FlowFile B",
        "            │   └── #4 ROUTE by Gen -> success",
        "            │       └── #7 JOIN by Gen",
        "            │           └── FlowFile E",
        "            │               └── #8 SEND by Gen",
        "            │                   └── #9 DROP by Gen",
        "            ├── FlowFile C",
        "            │   └── #5 CLONE by Gen",
        "            │       └── FlowFile D",
        "            │           └── #7 JOIN by Gen (see above)",
        "            └── #6 DROP by Gen",
        "(14 of the family's 14 nodes shown)",
    ])
    assert '"event:3" -> "flowfile:B"' in to_dot(view)
