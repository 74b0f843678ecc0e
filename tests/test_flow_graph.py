"""The flow's picture (``flowactors.ops.flow_graph``) and ``flowactors graph``: every processor and
connection drawn, every text inside its box and the canvas, bad input refused in one line."""

from __future__ import annotations

import struct
from pathlib import Path
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from flowactors import Flow
from flowactors.cli.main import build_app, load_flow
from flowactors.ops import png
from flowactors.ops.flow_graph import layout, to_svg
from flowactors.processors import Funnel, GenerateFlowFile, MergeContent, RouteOnAttribute, SplitText, UpdateAttribute

SVG = "{http://www.w3.org/2000/svg}"


def branching_flow() -> Flow:
    """A fork, a join, a loop back (retry) and a processor with a long name."""
    flow = Flow("picture")
    generate = flow.add(GenerateFlowFile, "generate a rather long stream of test records", properties={
        "Custom Text": "a\nb\n"})
    split = flow.add(SplitText, "split", properties={"Line Split Count": 1}, auto_terminate=["original", "failure"])
    route = flow.add(RouteOnAttribute, "route", properties={"big": "${fragment.index:equals(1)}"},
                     auto_terminate=["unmatched"])
    retry = flow.add(UpdateAttribute, "retry", properties={"tries": "1"})
    merge = flow.add(MergeContent, "merge", auto_terminate=["merged", "original", "failure"])
    keep = flow.add(Funnel, "keep", auto_terminate=["success"])
    flow.connect(generate, split, name="to-split")
    flow.connect(split, route, "splits", name="splits")
    flow.connect(route, retry, "big", name="to-retry")
    flow.connect(retry, route, name="retried")            # a cycle
    flow.connect(route, merge, "big", name="to-merge")
    flow.connect(split, keep, "splits", name="copies")
    flow.connect(keep, merge, name="joined")
    return flow


#: advance of a DejaVu Sans Mono character (regular and bold), in em (1233 / 2048): the font's own
#: metric, not the layout's constant, so a layout that measures too little is caught
EM = 0.602


def text_extent(text: ET.Element) -> tuple[float, float, float, float]:
    """Left, right, top and bottom of a text element in the picture's font."""
    size = float(text.get("font-size", 12))
    x, y = float(text.get("x")), float(text.get("y"))
    return x, x + len(text.text or "") * EM * size, y - size, y + 4


@pytest.mark.parametrize("direction", ["lr", "tb"])
@pytest.mark.parametrize("live", [False, True])
def test_every_processor_and_connection_is_drawn_with_its_texts_inside(direction, live):
    flow = branching_flow()
    root = ET.fromstring(to_svg(flow, direction, live))
    width, height = float(root.get("width")), float(root.get("height"))
    processors = {g.get("data-processor"): g for g in root.iter(f"{SVG}g") if g.get("class") == "processor"}
    connections = {g.get("data-connection"): g for g in root.iter(f"{SVG}g") if g.get("class") == "connection"}
    assert set(processors) == set(flow.processors)
    assert set(connections) == {c.id for c in flow.connections}
    edges = [p.get("data-connection") for p in root.iter(f"{SVG}path") if p.get("class") == "edge"]
    assert sorted(edges) == sorted([c.id for c in flow.connections] * 2)   # into its label, out of it
    for text in root.iter(f"{SVG}text"):
        left, right, top, bottom = text_extent(text)
        assert 0 <= left and right <= width and 0 <= top and bottom <= height, (text.text, width, height)
    for group in [*processors.values(), *connections.values()]:
        rect = group.find(f"{SVG}rect")
        x, y, w, h = (float(rect.get(k)) for k in ("x", "y", "width", "height"))
        for text in group.iter(f"{SVG}text"):
            left, right, top, bottom = text_extent(text)
            assert x <= left and right <= x + w and y <= top and bottom <= y + h, text.text
    names = {g.find(f"{SVG}text").text for g in processors.values()}
    assert names == set(flow.processors)   # whole names, never shortened
    assert len([t for t in root.iter(f"{SVG}text") if t.get("class") == "stats"]) == (
        2 * (len(flow.processors) + len(flow.connections)) if live else 0)


def test_no_two_boxes_overlap():
    drawing = layout(branching_flow())
    boxes = list(drawing.boxes.values())
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            apart = (abs(a.x - b.x) * 2 >= a.width + b.width) or (abs(a.y - b.y) * 2 >= a.height + b.height)
            assert apart, (a.key, b.key)


def test_a_connection_to_no_processor_is_named():
    flow = Flow("broken")
    flow.add(Funnel, "a")
    flow.connect("a", "nowhere", name="lost")
    with pytest.raises(ValueError, match="connection 'lost' joins 'nowhere', which is not a processor of flow 'broken'"):
        to_svg(flow)


# ---------------------------------------------------------------------- flowactors graph


FLOW_FILE = """
from flowactors import Flow
from flowactors.processors import Funnel, GenerateFlowFile
flow = Flow("drawn")
flow.connect(flow.add(GenerateFlowFile, "make"), flow.add(Funnel, "sink", auto_terminate=["success"]), name="made")
"""


def drawn(tmp_path, name: str) -> tuple[Path, Path]:
    """``flowactors graph`` of FLOW_FILE to ``name``: (the flow file, the picture written)."""
    source = tmp_path / "flow.py"
    source.write_text(FLOW_FILE)
    out = tmp_path / name
    result = CliRunner().invoke(build_app(), ["graph", str(source), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "flow 'drawn': 2 processors, 1 connections, drawn to" in result.output
    return source, out


def test_graph_writes_the_flow_as_svg(tmp_path):
    _, out = drawn(tmp_path, "flow.svg")
    root = ET.fromstring(out.read_text())
    assert {g.get("data-processor") for g in root.iter(f"{SVG}g") if g.get("class") == "processor"} == {"make", "sink"}
    assert [g.get("data-connection") for g in root.iter(f"{SVG}g") if g.get("class") == "connection"] == ["made"]


def test_graph_says_before_any_work_that_png_needs_a_renderer(tmp_path, monkeypatch):
    monkeypatch.setattr(png, "PNG_PACKAGE", "resvg_py_not_installed")
    out = tmp_path / "flow.png"
    result = CliRunner().invoke(build_app(), ["graph", str(tmp_path / "not-even-there.py"), "-o", str(out)])
    assert result.exit_code == 1
    assert "writing a .png picture needs the Python package resvg-py" in result.output
    assert not out.exists()


def test_graph_draws_a_png(tmp_path):
    source, out = drawn(tmp_path, "flow.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])   # IHDR: the SVG's own size
    svg = ET.fromstring(to_svg(load_flow(source)))
    assert (width, height) == (round(float(svg.get("width"))), round(float(svg.get("height"))))


@pytest.mark.parametrize("arguments, message", [
    (["-o", "flow.pdf"], "cannot draw a flow as 'flow.pdf': the file name must end in one of .svg, .png"),
    (["-o", "missing-folder/flow.svg"], "cannot write missing-folder/flow.svg: the folder missing-folder does not exist"),
])
def test_graph_refuses_bad_options_in_one_line(tmp_path, monkeypatch, arguments, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.py").write_text(FLOW_FILE)
    result = CliRunner().invoke(build_app(), ["graph", "flow.py", *arguments])
    assert result.exit_code == 2
    assert result.output.strip() == f"flowactors: {message}"
    assert not list(tmp_path.glob("*.pdf"))


def test_graph_refuses_an_unknown_direction(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flow.py").write_text(FLOW_FILE)
    result = CliRunner().invoke(build_app(), ["graph", "flow.py", "-o", "flow.svg", "--direction", "up"])
    assert result.exit_code == 2
    assert "'up' is not one of lr, tb" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "flow.svg").exists()


def test_graph_of_a_missing_flow_file(tmp_path):
    result = CliRunner().invoke(build_app(), ["graph", str(tmp_path / "gone.py"), "-o", str(tmp_path / "g.svg")])
    assert result.exit_code == 2
    assert result.output.strip() == f"flowactors: no flow file at {tmp_path / 'gone.py'}"
