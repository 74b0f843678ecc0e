"""Pictures of a lineage: SVG drawn here, Graphviz DOT, and PNG (the SVG rasterised by resvg).

What is drawn is the condensed view (``flowactors.ops.lineage_view``): the FlowFile asked for in
bold, large forks and joins as one group node each ("… 997 more splits"), so a family of
thousands draws in a few hundred pixels. The SVG uses a plain layered layout with no
dependency: each node sits one layer below its lowest parent (longest path from the roots),
nodes within a layer are ordered by the mean position of their neighbours (a few barycenter
sweeps down and up, which removes most crossings of fork/join diamonds), and edges are curves
from the bottom of the source to the top of the target. FlowFiles are ellipses, events boxes
coloured by type, groups stacked dashed boxes; hovering shows a node's details (an SVG
``<title>``). Labels are cut to ``MAX_LABEL`` characters (a FlowFile shows the end of its uuid:
uuids of one family share their time-ordered start) and the canvas is as wide as its widest
row or its title, whichever is wider, so nothing is cut.

PNG: the SVG rendered by resvg (the ``resvg-py`` wheel: no system library to install).
``check_output(path)`` (``flowactors.ops.png.check_picture`` for a lineage) says, before any
work, whether a path can be written; ``write_picture`` writes it.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from flowactors.ops.lineage_view import LineageView, ViewNode, condense
from flowactors.ops.png import PictureError, check_picture, svg_to_png
from repositories.provenance.lineage import Lineage

FORMATS = (".svg", ".dot", ".png")

CHAR_WIDTH = 7.3        # px per character of the 12 px monospace font (DejaVu Sans Mono: 0.602 em)
TITLE_CHAR_WIDTH = 8.5  # px per character of the 14 px bold title
MAX_LABEL = 40          # characters of a node's label in the picture (the tooltip has it all)
NODE_HEIGHT = 30
PADDING_X = 12          # inside a node, each side
GAP_X = 28              # between nodes of one layer
GAP_Y = 56              # between layers
MARGIN = 20
TITLE_LINE = 20         # px a title line takes
SWEEPS = 4

_COLOURS = {
    "CREATE": "#d8f0d2", "RECEIVE": "#d8f0d2", "FETCH": "#d8f0d2",
    "SEND": "#d2e4f7", "DOWNLOAD": "#d2e4f7",
    "DROP": "#e4e4e4", "EXPIRE": "#f5d5d0",
    "FORK": "#e8dcf5", "JOIN": "#e8dcf5", "CLONE": "#e8dcf5", "REPLAY": "#fbe3c2",
}
_EVENT_COLOUR = "#f7f7f2"
_FLOWFILE_COLOUR = "#fff6c8"
_GROUP_COLOUR = "#eef2f7"


#: what a lineage's picture that cannot be written raises (``PngError`` is one too)
RenderError = PictureError


def check_output(path: str | os.PathLike) -> Path:
    """``check_picture`` for a lineage: refuse, before any work, a path its picture cannot be
    written to (a suffix not in ``FORMATS``, a missing folder, .png without its renderer)."""
    return check_picture(path, FORMATS, "a lineage")


def write_picture(lineage: Lineage | LineageView, path: str | os.PathLike, flowfile_uuid: str | None = None) -> Path:
    """Write the view to ``path`` in the format its suffix names (.svg, .dot or .png); a
    ``Lineage`` is condensed first, from ``flowfile_uuid`` (default: the uuid it was read for).
    The path is checked first as ``check_output`` checks it (a suffix, a stat: cheap), so a
    caller that did not check it gets the same refusal as the command, before any drawing."""
    path = check_output(path)
    view = lineage if isinstance(lineage, LineageView) else condense(lineage, flowfile_uuid)
    suffix = path.suffix.lower()
    if suffix == ".dot":
        path.write_text(to_dot(view), encoding="utf-8")
    elif suffix == ".svg":
        path.write_text(to_svg(view), encoding="utf-8")
    else:
        path.write_bytes(to_png(view))
    return path


def to_png(view: LineageView) -> bytes:
    """The SVG rasterised by resvg, at its own size (``PngError``, a ``RenderError``, without resvg-py)."""
    return svg_to_png(to_svg(view))


def to_dot(view: LineageView) -> str:
    """Graphviz source of the view: FlowFiles as ellipses, events as boxes, groups as dashed boxes."""
    shapes = {"flowfile": "ellipse", "event": "box", "group": "box, style=dashed"}
    out = ["digraph lineage {", "  rankdir=TB;"]
    for n in view.nodes:
        bold = ", penwidth=2.5" if n.id == view.focus else ""
        out.append(f"  {_dot_quote(n.id)} [shape={shapes[n.kind]}{bold}, label={_dot_quote(n.label)}];")
    for e in view.edges:
        label = e.flowfile_uuid[:8] if e.flowfile_uuid else f"{e.count} FlowFiles"
        out.append(f"  {_dot_quote(e.source)} -> {_dot_quote(e.target)} [label={_dot_quote(label)}];")
    out.append("}")
    return "\n".join(out) + "\n"


def _dot_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)   # a DOT quoted string takes JSON's escapes


def picture_label(node: ViewNode) -> str:
    """A node's label in the picture: a FlowFile by the end of its uuid, anything cut to MAX_LABEL."""
    if node.kind == "flowfile" and node.node is not None:
        return f"FlowFile …{node.node.flowfile_uuid[-12:]}"
    return node.label if len(node.label) <= MAX_LABEL else node.label[:MAX_LABEL - 1] + "…"


# ---------------------------------------------------------------------- layout


def layout(view: LineageView, top: float = 0.0) -> tuple[dict[str, tuple[float, float, float]], float, float]:
    """Each node's centre x, centre y and width, the first layer ``top`` px below the margin; and
    the drawing's width and height."""
    ids = [n.id for n in view.nodes]
    parents: dict[str, list[str]] = {i: [] for i in ids}
    children: dict[str, list[str]] = {i: [] for i in ids}
    for e in view.edges:
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
    widths = {n.id: len(picture_label(n)) * CHAR_WIDTH + 2 * PADDING_X for n in view.nodes}
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
        y = MARGIN + top + r * (NODE_HEIGHT + GAP_Y) + NODE_HEIGHT / 2
        for node_id in row:
            placed[node_id] = (x[node_id] - left + MARGIN, y, widths[node_id])
    height = MARGIN * 2 + top + len(rows) * NODE_HEIGHT + max(len(rows) - 1, 0) * GAP_Y
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


def to_svg(view: LineageView) -> str:
    """The view as a standalone SVG document (see the module docstring); each node a
    ``<g class="node flowfile|event|group" data-node=ID>``, a group with ``data-count``."""
    titles = title_lines(view)
    top = len(titles) * TITLE_LINE + 8
    placed, width, height = layout(view, top)
    width = max(width, max(len(t) for t in titles) * TITLE_CHAR_WIDTH + 2 * MARGIN)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="DejaVu Sans Mono, Menlo, monospace" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>',
        '<rect width="100%" height="100%" fill="white"/>',
    ]
    for i, line in enumerate(titles):
        weight = ' font-weight="bold"' if i == 0 else ""
        out.append(f'<text class="title" x="{MARGIN}" y="{MARGIN + 14 + i * TITLE_LINE}" font-size="14"{weight}>'
                   f'{escape(line)}</text>')
    out.append('<g class="edges" fill="none" stroke="#555" stroke-width="1.2">')
    for e in view.edges:
        sx, sy, _ = placed[e.source]
        tx, ty, _ = placed[e.target]
        y0, y1 = sy + NODE_HEIGHT / 2, ty - NODE_HEIGHT / 2
        bend = max((y1 - y0) / 2, 12)
        what = f"FlowFile {e.flowfile_uuid}" if e.flowfile_uuid else f"{e.count:,} FlowFiles"
        out.append(
            f'<g class="edge" data-source={quoteattr(e.source)} data-target={quoteattr(e.target)}>'
            f'<title>{escape(what)}</title>'
            f'<path d="M {sx:.1f} {y0:.1f} C {sx:.1f} {y0 + bend:.1f}, {tx:.1f} {y1 - bend:.1f}, '
            f'{tx:.1f} {y1:.1f}" marker-end="url(#arrow)"/></g>')
    out.append('</g>')
    out.append('<g class="nodes">')
    for n in view.nodes:
        x, y, w = placed[n.id]
        extra = f' data-count="{n.count}"' if n.kind == "group" else ""
        out.append(f'<g class="node {n.kind}" data-node={quoteattr(n.id)}{extra}><title>{escape(_tooltip(n))}</title>'
                   f'{_shape(n, x, y, w, n.id == view.focus)}'
                   f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle">{escape(picture_label(n))}</text></g>')
    out.append('</g>')
    out.append('</svg>')
    return "\n".join(out) + "\n"


def title_lines(view: LineageView) -> list[str]:
    """The picture's title: the FlowFile asked for, then what the picture shows of its family."""
    groups = view.groups
    second = f"{len(view.nodes):,} of the family's {view.lineage_nodes:,} nodes ({view.lineage_events:,} events)"
    if groups:
        second += f"; {len(groups)} group{'s' * (len(groups) > 1)} collapse {sum(len(g.members) for g in groups):,}"
    if view.truncated:
        second += "; truncated: the family has more events than were read"
    return [f"Lineage of FlowFile {view.flowfile_uuid}", second]


def _shape(n: ViewNode, x: float, y: float, w: float, focus: bool) -> str:
    if n.kind == "flowfile":
        bold = ' stroke-width="2.5"' if focus else ""
        return (f'<ellipse cx="{x:.1f}" cy="{y:.1f}" rx="{w / 2:.1f}" ry="{NODE_HEIGHT / 2:.1f}" '
                f'fill="{_FLOWFILE_COLOUR}" stroke="#8a7a2a"{bold}/>')
    box = (f'x="{x - w / 2:.1f}" y="{y - NODE_HEIGHT / 2:.1f}" width="{w:.1f}" height="{NODE_HEIGHT}" rx="5"')
    if n.kind == "group":   # a stack of cards: one behind, offset
        behind = f'x="{x - w / 2 + 4:.1f}" y="{y - NODE_HEIGHT / 2 - 4:.1f}" width="{w:.1f}" height="{NODE_HEIGHT}" rx="5"'
        return (f'<rect {behind} fill="{_GROUP_COLOUR}" stroke="#778" stroke-dasharray="4 3"/>'
                f'<rect {box} fill="{_GROUP_COLOUR}" stroke="#556" stroke-dasharray="4 3"/>')
    colour = _COLOURS.get(str(n.node.event_type), _EVENT_COLOUR)
    return f'<rect {box} fill="{colour}" stroke="#666"/>'


def _tooltip(n: ViewNode) -> str:
    if n.kind == "group":
        return f"{n.description}; group {n.id}"
    node = n.node
    if node.kind == "flowfile":
        return f"FlowFile {node.flowfile_uuid}"
    when = datetime.fromtimestamp((node.timestamp or 0) / 1000, timezone.utc).isoformat(timespec="milliseconds")
    parts = [f"event {node.event_id}: {node.event_type}", f"time {when}", f"FlowFile {node.flowfile_uuid}",
             f"component {node.component_name} ({node.component_id})"]
    if node.relationship:
        parts.append(f"relationship {node.relationship}")
    return "\n".join(parts)
