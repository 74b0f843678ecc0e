"""Scenario 13: the lineage of a split and merge, drawn (issue 19: under 1 s, under 2,000 px wide).

A real flow on the in-process engine - GenerateFlowFile (one file of ``lines`` lines) ->
SplitText (a FlowFile a line) -> MergeContent (all of them into one) - leaves a family of
``2 * lines + 7`` lineage nodes in a real provenance repository. Timed, from the stopped
repository: reading the lineage of the merged FlowFile, condensing it (``lineage_view.condense``:
the 1,000 splits and their 1,000 DROPs become two groups) and drawing the SVG; against reading the
lineage alone, the least any picture of it costs (the notes give condensing and drawing apart).
Median of 5.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from bench import row
from bench.provenance_workload import timed
from flowactors import Flow
from flowactors.driver.running import run_flow
from flowactors.ops.lineage_render import to_svg
from flowactors.ops.lineage_view import condense, to_text
from flowactors.processors import GenerateFlowFile, MergeContent, SplitText
from repositories.provenance import WriteAheadProvenanceRepository

S13 = "13 lineage"


def split_merge_flow(lines: int) -> Flow:
    """generate (one file of ``lines`` lines) -> split (a FlowFile a line) -> merge (all in one):
    one FORK with ``lines`` children and one JOIN with ``lines`` parents."""
    flow = Flow("split-merge")
    flow.add(GenerateFlowFile, "generate", properties={
        "Custom Text": "".join(f"line {i}\n" for i in range(lines)), "Max FlowFiles": 1, "filename": "lines.txt"})
    flow.add(SplitText, "split", properties={"Line Split Count": 1}, auto_terminate=["original", "failure"])
    flow.add(MergeContent, "merge", properties={
        "Minimum Number of Entries": lines, "Maximum Number of Entries": lines, "Max Bin Age": "60 sec"},
        auto_terminate=["merged", "original", "failure"])
    flow.connect("generate", "split")
    flow.connect("split", "merge", "splits")
    return flow


def run(quick: bool, workdir: Path, size: int | None = None) -> list[dict]:
    """``size``: lines split and merged (default 1,000, quick 100)."""
    lines = size or (100 if quick else 1000)
    repository = workdir / "repository"
    run_flow(split_merge_flow(lines), repository, engine="in-process", timeout=300)
    with WriteAheadProvenanceRepository(repository / "provenance") as provenance:
        merged = next(e for e in provenance.search(event_type="JOIN", limit=1)).flowfile_uuid
        read_ms, lineage = timed(lambda: provenance.lineage(merged), repeat=5)
        drawn_ms, svg = timed(lambda: to_svg(condense(provenance.lineage(merged), merged)), repeat=5)
    view_ms, view = timed(lambda: condense(lineage, merged), repeat=5)
    svg_ms, _ = timed(lambda: to_svg(view), repeat=5)
    root = ET.fromstring(svg)
    return [row(S13, f"lineage of a {lines:,}-line split + merge to SVG", drawn_ms, read_ms,
                "read the lineage (WriteAheadProvenanceRepository.lineage)", "ms",
                f"median of 5; condensing {view_ms:.1f} ms, drawing {svg_ms:.1f} ms; "
                f"the merged FlowFile's family of {len(lineage.nodes):,} nodes drawn as "
                f"{len(view.nodes)} ({len(view.groups)} groups), SVG {root.get('width')} x {root.get('height')} px, "
                f"text {len(to_text(view).splitlines())} lines; issue 19's floor: under 1,000 ms and 2,000 px")]
