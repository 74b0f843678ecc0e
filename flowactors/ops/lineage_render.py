"""Pictures of a lineage graph: SVG drawn here, Graphviz DOT, and PNG through an installed tool.

A lineage is a small DAG (tens to hundreds of nodes), so the SVG uses a plain layered layout
with no dependency: each node sits one layer below its lowest parent (longest path from the
roots), nodes within a layer are ordered by the mean position of their neighbours (a few
barycenter sweeps down and up, which removes most crossings of fork/join diamonds), and edges are
curves from the bottom of the source to the top of the target. FlowFiles are ellipses, events
boxes coloured by type; hovering shows a node's details (an SVG ``<title>``).

PNG needs Graphviz's ``dot`` (rendering the DOT source) or ``rsvg-convert`` (rendering the SVG);
without either, ``write_picture`` says so instead of writing a broken file.
"""

from __future__ import annotations

import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from repositories.provenance.lineage import Lineage, LineageNode

FORMATS = (".svg", ".dot", ".png")

CHAR_WIDTH = 7.3        # px per character of the 12 px monospace font
NODE_HEIGHT = 30
PADDING_X = 12          # inside a node, each side
GAP_X = 28              # between nodes of one layer
GAP_Y = 56              # between layers
MARGIN = 20
TITLE_HEIGHT = 28
SWEEPS = 4

_COLOURS = {
    "CREATE": "#d8f0d2", "RECEIVE": "#d8f0d2", "FETCH": "#d8f0d2",
    "SEND": "#d2e4f7", "DOWNLOAD": "#d2e4f7",
    "DROP": "#e4e4e4", "EXPIRE": "#f5d5d0",
    "FORK": "#e8dcf5", "JOIN": "#e8dcf5", "CLONE": "#e8dcf5", "REPLAY": "#fbe3c2",
}
_EVENT_COLOUR = "#f7f7f2"
_FLOWFILE_COLOUR = "#fff6c8"


class RenderError(RuntimeError):
    """The picture cannot be written in that format here (the message says what is missing)."""


def write_picture(lineage: Lineage, path: str | Path) -> Path:
    """Write the lineage to ``path`` in the format its suffix names (.svg, .dot or .png)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".svg":
        path.write_text(to_svg(lineage), encoding="utf-8")
    elif suffix == ".dot":
        path.write_text(lineage.to_dot(), encoding="utf-8")
    elif suffix == ".png":
        _write_png(lineage, path)
    else:
        raise RenderError(f"cannot write a lineage picture as '{suffix or path.name}': use one of {', '.join(FORMATS)}")
    return path


def _write_png(lineage: Lineage, path: Path) -> None:
    if shutil.which("dot"):
        command, source = ["dot", "-Tpng", "-o", str(path)], lineage.to_dot()
    elif shutil.which("rsvg-convert"):
        command, source = ["rsvg-convert", "-f", "png", "-o", str(path)], to_svg(lineage)
    else:
        raise RenderError("writing a .png picture needs Graphviz's 'dot' command (e.g. apt-get install "
                          "graphviz) or rsvg-convert, and neither is installed; write .svg or .dot instead")
    done = subprocess.run(command, input=source.encode(), capture_output=True, timeout=120)
    if done.returncode != 0:
        raise RenderError(f"{command[0]} could not draw the picture: {done.stderr.decode(errors='replace').strip()}")


# ---------------------------------------------------------------------- layout


def layout(lineage: Lineage) -> tuple[dict[str, tuple[float, float, float]], float, float]:
    """Each node's centre x, centre y and width; and the drawing's width and height."""
    ids = [n.id for n in lineage.nodes]
    parents: dict[str, list[str]] = {i: [] for i in ids}
    children: dict[str, list[str]] = {i: [] for i in ids}
    for e in lineage.edges:
        parents[e.target].append(e.source)
        children[e.source].append(e.target)
    depth = _layers(ids, parents, children)
    rows: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for node_id in ids:
        rows[depth[node_id]].append(node_id)
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        order = range(1, len(rows)) if down else range(len(rows) - 2, -1, -1)
        for r in order:
            position = {n: i for i, n in enumerate(rows[r - 1 if down else r + 1])}
            neighbours = parents if down else children
            current = {n: i for i, n in enumerate(rows[r])}
            rows[r] = sorted(rows[r], key=lambda n: _barycenter(n, neighbours, position, current[n]))
    widths = {n.id: len(n.label) * CHAR_WIDTH + 2 * PADDING_X for n in lineage.nodes}
    x: dict[str, float] = {}
    for r, row in enumerate(rows):   # each node as near the middle of its parents as its row allows
        if r:   # a last downward barycenter pass, on real coordinates
            fallback = {n: i for i, n in enumerate(row)}
            want = {n: sum(x[p] for p in parents[n]) / len(parents[n]) if parents[n] else None for n in row}
            row.sort(key=lambda n: (want[n] if want[n] is not None else float("inf"), fallback[n]))
            wanted = [want[n] if want[n] is not None else 0.0 for n in row]
        else:
            wanted = [0.0] * len(row)
        _place(row, wanted, widths, x)
    left = min((x[n] - widths[n] / 2 for n in ids), default=0.0)
    right = max((x[n] + widths[n] / 2 for n in ids), default=0.0)
    width = max(right - left + 2 * MARGIN, 360.0)
    placed: dict[str, tuple[float, float, float]] = {}
    for r, row in enumerate(rows):
        y = MARGIN + TITLE_HEIGHT + r * (NODE_HEIGHT + GAP_Y) + NODE_HEIGHT / 2
        for node_id in row:
            placed[node_id] = (x[node_id] - left + MARGIN, y, widths[node_id])
    height = MARGIN * 2 + TITLE_HEIGHT + len(rows) * NODE_HEIGHT + max(len(rows) - 1, 0) * GAP_Y
    return placed, width, height


def _place(row: list[str], wanted: list[float], widths: dict[str, float], x: dict[str, float]) -> None:
    """Centres for one row in its order: no overlap, the block shifted so that on average each node
    is where it wants to be."""
    position = None
    for node_id, want in zip(row, wanted):
        half = widths[node_id] / 2
        position = want if position is None else max(want, position + GAP_X + half)
        x[node_id] = position
        position += half
    if row:
        shift = sum(wanted) / len(row) - sum(x[n] for n in row) / len(row)
        for node_id in row:
            x[node_id] += shift


def _layers(ids: list[str], parents: dict[str, list[str]], children: dict[str, list[str]]) -> dict[str, int]:
    """Longest path from a root (Kahn's order; the graph is acyclic: edges follow event ids)."""
    waiting = {i: len(parents[i]) for i in ids}
    depth = {i: 0 for i in ids}
    ready = [i for i in ids if waiting[i] == 0]
    while ready:
        node_id = ready.pop(0)
        for child in children[node_id]:
            depth[child] = max(depth[child], depth[node_id] + 1)
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    return depth


def _barycenter(node_id: str, neighbours: dict[str, list[str]], position: dict[str, int], current: int) -> float:
    placed = [position[n] for n in neighbours[node_id] if n in position]
    return sum(placed) / len(placed) if placed else float(current)


# ---------------------------------------------------------------------- SVG


def to_svg(lineage: Lineage) -> str:
    """The lineage as a standalone SVG document (see the module docstring)."""
    placed, width, height = layout(lineage)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="DejaVu Sans Mono, Menlo, monospace" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text class="title" x="{MARGIN}" y="{MARGIN + 14}" font-size="14" font-weight="bold">'
        f'{escape(_title(lineage))}</text>',
        '<g class="edges" fill="none" stroke="#555" stroke-width="1.2">',
    ]
    for e in lineage.edges:
        sx, sy, _ = placed[e.source]
        tx, ty, _ = placed[e.target]
        y0, y1 = sy + NODE_HEIGHT / 2, ty - NODE_HEIGHT / 2
        bend = max((y1 - y0) / 2, 12)
        out.append(
            f'<g class="edge" data-source={quoteattr(e.source)} data-target={quoteattr(e.target)}>'
            f'<title>{escape(f"FlowFile {e.flowfile_uuid}")}</title>'
            f'<path d="M {sx:.1f} {y0:.1f} C {sx:.1f} {y0 + bend:.1f}, {tx:.1f} {y1 - bend:.1f}, '
            f'{tx:.1f} {y1:.1f}" marker-end="url(#arrow)"/></g>')
    out.append('</g>')
    out.append('<g class="nodes">')
    for n in lineage.nodes:
        x, y, w = placed[n.id]
        focus = ' stroke-width="2.5"' if n.kind == "flowfile" and n.flowfile_uuid == lineage.flowfile_uuid else ""
        if n.kind == "flowfile":
            shape = (f'<ellipse cx="{x:.1f}" cy="{y:.1f}" rx="{w / 2:.1f}" ry="{NODE_HEIGHT / 2:.1f}" '
                     f'fill="{_FLOWFILE_COLOUR}" stroke="#8a7a2a"{focus}/>')
        else:
            colour = _COLOURS.get(str(n.event_type), _EVENT_COLOUR)
            shape = (f'<rect x="{x - w / 2:.1f}" y="{y - NODE_HEIGHT / 2:.1f}" width="{w:.1f}" '
                     f'height="{NODE_HEIGHT}" rx="5" fill="{colour}" stroke="#666"/>')
        out.append(
            f'<g class="node {n.kind}" data-node={quoteattr(n.id)}><title>{escape(_tooltip(n))}</title>{shape}'
            f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle">{escape(n.label)}</text></g>')
    out.append('</g>')
    out.append('</svg>')
    return "\n".join(out) + "\n"


def _title(lineage: Lineage) -> str:
    text = (f"Lineage of FlowFile {lineage.flowfile_uuid}: {sum(n.kind == 'event' for n in lineage.nodes)} "
            f"events, {sum(n.kind == 'flowfile' for n in lineage.nodes)} FlowFiles")
    return text + (" (truncated)" if lineage.truncated else "")


def _tooltip(n: LineageNode) -> str:
    if n.kind == "flowfile":
        return f"FlowFile {n.flowfile_uuid}"
    when = datetime.fromtimestamp((n.timestamp or 0) / 1000, timezone.utc).isoformat(timespec="milliseconds")
    parts = [f"event {n.event_id}: {n.event_type}", f"time {when}", f"FlowFile {n.flowfile_uuid}",
             f"component {n.component_name} ({n.component_id})"]
    if n.relationship:
        parts.append(f"relationship {n.relationship}")
    return "\n".join(parts)
