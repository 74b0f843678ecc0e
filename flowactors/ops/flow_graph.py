"""A flow's processors and connections laid out and drawn as SVG: the static picture
(``flowactors graph``) and the live page's graph (``flowactors.ops.web``) are the same drawing.

Layout (a plain layered one, no dependency): every connection becomes a small *label* node
between its source and its destination, so its name, relationships and live counts get a place
of their own that nothing overlaps. Layers are the longest path from a source processor, with
the edges that close a cycle (a ``failure`` routed back, a retry loop) set aside first (depth-first
search); a few barycenter sweeps order each layer to remove crossings; then each node is placed
as near its neighbours in the previous layer as the nodes above it allow. Left-to-right (NiFi's
canvas reads that way) or top-down.

Guarantees: a box is as wide as its longest line at ``CHAR_WIDTH`` a character of the 12 px
monospace font the SVG names (so a name is never cut), every text lies inside the canvas, and
each processor and connection has one element carrying its name (``data-processor``,
``data-connection``) that the live page fills with counts (``text.stats``).
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from flowactors.sdk.flow import Flow

DIRECTIONS = ("lr", "tb")

CHAR_WIDTH = 7.3        # px a character of the 12 px monospace font
LINE_HEIGHT = 16
PADDING = 10            # inside a box, each side
GAP_ACROSS = 24         # between two boxes of one layer
GAP_ALONG = 48          # between two layers
MARGIN = 20
TITLE_HEIGHT = 28
LOOP_ROOM = 40          # below (or right of) the drawing, for edges that go back
SWEEPS = 4
#: characters reserved for a live line (``page.js`` keeps its counts within it)
STATS_CHARS = 26


@dataclass
class Box:
    """One drawn node: a processor or a connection's label; ``x``, ``y`` its centre."""

    key: str
    kind: str                 # "processor" or "connection"
    lines: list[str]          # its text, first line bold
    live_lines: int           # empty lines kept for live counts
    width: float = 0.0
    height: float = 0.0
    x: float = 0.0
    y: float = 0.0


@dataclass
class Drawing:
    """Where everything goes: boxes by key (``p:<name>``, ``c:<connection id>``), the canvas size."""

    title: str
    boxes: dict[str, Box]
    edges: list[tuple[str, str, str, bool]]   # (from key, to key, connection id, goes back)
    width: float
    height: float
    direction: str


def layout(flow: Flow, direction: str = "lr", live: bool = False) -> Drawing:
    """Place ``flow``'s processors and connection labels; ``live`` keeps two lines in each box for
    the page's counts."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")
    boxes: dict[str, Box] = {}
    for name, node in flow.processors.items():
        boxes[f"p:{name}"] = Box(f"p:{name}", "processor", [name, node.type.__name__], 2 if live else 0)
    edges: list[tuple[str, str, str]] = []
    for c in flow.connections:
        for end in (c.source, c.destination):
            if end not in flow.processors:
                raise ValueError(f"connection '{c.name}' joins '{end}', which is not a processor of flow '{flow.name}'")
        key = f"c:{c.id}"
        lines = [c.name] if ", ".join(c.relationships) == c.name else [c.name, ", ".join(c.relationships)]
        boxes[key] = Box(key, "connection", lines, 2 if live else 0)
        edges += [(f"p:{c.source}", key, c.id), (key, f"p:{c.destination}", c.id)]
    for box in boxes.values():
        longest = max([len(line) for line in box.lines] + [STATS_CHARS if box.live_lines else 0])
        box.width = longest * CHAR_WIDTH + 2 * PADDING
        box.height = (len(box.lines) + box.live_lines) * LINE_HEIGHT + 2 * PADDING - 4
    keys = list(boxes)
    back = _back_edges(keys, [(a, b) for a, b, _ in edges])
    forward = [(a, b) for a, b, _ in edges if (a, b) not in back]
    rows = _ordered_layers(keys, forward)
    along = (lambda b: b.width) if direction == "lr" else (lambda b: b.height)
    across = (lambda b: b.height) if direction == "lr" else (lambda b: b.width)
    parents: dict[str, list[str]] = {k: [] for k in keys}
    for a, b in forward:
        parents[b].append(a)
    position: dict[str, float] = {}   # centre across the layers
    for row in rows:
        _place_row(row, [boxes[k] for k in row], parents, position, across)
    offset = 0.0                       # centre along the layers
    low = min(position[k] - across(boxes[k]) / 2 for k in keys) if keys else 0.0
    for row in rows:
        depth = max(along(boxes[k]) for k in row)
        for k in row:
            a, c = offset + depth / 2, position[k] - low
            boxes[k].x, boxes[k].y = (a, c) if direction == "lr" else (c, a)
        offset += depth + GAP_ALONG
    title = f"flow {flow.name}: {len(flow.processors)} processors, {len(flow.connections)} connections"
    for box in boxes.values():
        box.x += MARGIN
        box.y += MARGIN + TITLE_HEIGHT
    right = max([b.x + b.width / 2 for b in boxes.values()] + [0.0]) + MARGIN
    bottom = max([b.y + b.height / 2 for b in boxes.values()] + [0.0]) + MARGIN
    if back:
        right, bottom = (right, bottom + LOOP_ROOM) if direction == "lr" else (right + LOOP_ROOM, bottom)
    width = max(right, len(title) * CHAR_WIDTH * 14 / 12 + 2 * MARGIN)
    drawn = [(a, b, cid, (a, b) in back) for a, b, cid in edges]
    return Drawing(title, boxes, drawn, width, max(bottom, MARGIN * 2 + TITLE_HEIGHT), direction)


def _back_edges(keys: list[str], edges: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """The edges that close a cycle, found by a depth-first search from the nodes in flow order."""
    children: dict[str, list[str]] = {k: [] for k in keys}
    for a, b in edges:
        children[a].append(b)
    state: dict[str, int] = {}   # 1: on the current path, 2: done
    back: set[tuple[str, str]] = set()
    for root in keys:
        if root in state:
            continue
        stack = [(root, iter(children[root]))]
        state[root] = 1
        while stack:
            node, pending = stack[-1]
            child = next(pending, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child) == 1:
                back.add((node, child))
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(children[child])))
    return back


def _ordered_layers(keys: list[str], edges: list[tuple[str, str]]) -> list[list[str]]:
    """Layers by longest path (the edges are acyclic), each ordered by barycenter sweeps."""
    parents: dict[str, list[str]] = {k: [] for k in keys}
    children: dict[str, list[str]] = {k: [] for k in keys}
    for a, b in edges:
        parents[b].append(a)
        children[a].append(b)
    depth = {k: 0 for k in keys}
    waiting = {k: len(parents[k]) for k in keys}
    ready = [k for k in keys if not waiting[k]]
    while ready:
        node = ready.pop(0)
        for child in children[node]:
            depth[child] = max(depth[child], depth[node] + 1)
            waiting[child] -= 1
            if not waiting[child]:
                ready.append(child)
    rows: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for k in keys:
        rows[depth[k]].append(k)
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        for r in (range(1, len(rows)) if down else range(len(rows) - 2, -1, -1)):
            near = {k: i for i, k in enumerate(rows[r - 1 if down else r + 1])}
            links = parents if down else children
            current = {k: i for i, k in enumerate(rows[r])}

            def weight(k: str) -> float:
                placed = [near[n] for n in links[k] if n in near]
                return sum(placed) / len(placed) if placed else float(current[k])

            rows[r].sort(key=weight)
    return rows


def _place_row(row: list[str], boxes: list[Box], parents: dict[str, list[str]], position: dict[str, float],
               across) -> None:
    """Centres across the layer for one row, in its order: each as near the mean of its parents as
    the boxes before it allow, then the row shifted so that on average each is where it wants."""
    wanted = []
    for k in row:
        placed = [position[p] for p in parents[k] if p in position]
        wanted.append(sum(placed) / len(placed) if placed else None)
    known = [w for w in wanted if w is not None]
    fill = sum(known) / len(known) if known else 0.0
    wanted = [fill if w is None else w for w in wanted]
    end = None
    for k, box, want in zip(row, boxes, wanted):
        half = across(box) / 2
        centre = want if end is None else max(want, end + GAP_ACROSS + half)
        position[k] = centre
        end = centre + half
    shift = sum(wanted) / len(row) - sum(position[k] for k in row) / len(row)
    for k in row:
        position[k] += shift


# ---------------------------------------------------------------------- SVG


def to_svg(flow: Flow, direction: str = "lr", live: bool = False) -> str:
    """The flow as a standalone SVG document (see the module docstring)."""
    d = layout(flow, direction, live)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="flow-graph" width="{d.width:.0f}" height="{d.height:.0f}" '
        f'viewBox="0 0 {d.width:.0f} {d.height:.0f}" font-family="DejaVu Sans Mono, Menlo, monospace" font-size="12">',
        '<defs><marker id="flow-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text class="title" x="{MARGIN}" y="{MARGIN + 14}" font-size="14" font-weight="bold">{escape(d.title)}</text>',
        '<g class="edges" fill="none" stroke="#777" stroke-width="1.3">',
    ]
    for a, b, cid, goes_back in d.edges:
        end = b.startswith("p:")
        out.append(f'<path class="edge" data-connection={quoteattr(cid)} d="{_curve(d, a, b, goes_back)}"'
                   + (' marker-end="url(#flow-arrow)"/>' if end else "/>"))
    out.append('</g>')
    for box in d.boxes.values():
        out.append(_box_svg(box))
    out.append('</svg>')
    return "\n".join(out) + "\n"


def _curve(d: Drawing, a: str, b: str, goes_back: bool) -> str:
    s, t = d.boxes[a], d.boxes[b]
    if d.direction == "lr":
        x0, y0, x1, y1 = s.x + s.width / 2, s.y, t.x - t.width / 2, t.y
        if goes_back:   # out of the right side, under everything, into the left side
            low = d.height - LOOP_ROOM / 2
            return (f"M {x0:.1f} {y0:.1f} C {x0 + 40:.1f} {low:.1f}, {x1 - 40:.1f} {low:.1f}, {x1:.1f} {y1:.1f}")
        bend = max((x1 - x0) / 2, 12)
        return f"M {x0:.1f} {y0:.1f} C {x0 + bend:.1f} {y0:.1f}, {x1 - bend:.1f} {y1:.1f}, {x1:.1f} {y1:.1f}"
    x0, y0, x1, y1 = s.x, s.y + s.height / 2, t.x, t.y - t.height / 2
    if goes_back:
        side = d.width - LOOP_ROOM / 2
        return f"M {x0:.1f} {y0:.1f} C {side:.1f} {y0 + 40:.1f}, {side:.1f} {y1 - 40:.1f}, {x1:.1f} {y1:.1f}"
    bend = max((y1 - y0) / 2, 12)
    return f"M {x0:.1f} {y0:.1f} C {x0:.1f} {y0 + bend:.1f}, {x1:.1f} {y1 - bend:.1f}, {x1:.1f} {y1:.1f}"


def _box_svg(box: Box) -> str:
    name = box.key[2:]
    left, top = box.x - box.width / 2, box.y - box.height / 2
    attribute = "data-processor" if box.kind == "processor" else "data-connection"
    fill, stroke, radius = ("#eef3fb", "#4a6fa5", 4) if box.kind == "processor" else ("#fbfaf3", "#a59a4a", 10)
    parts = [f'<g class="{box.kind}" {attribute}={quoteattr(name)}>',
             f'<title>{escape(" / ".join(box.lines))}</title>',
             f'<rect x="{left:.1f}" y="{top:.1f}" width="{box.width:.1f}" height="{box.height:.1f}" rx="{radius}" '
             f'fill="{fill}" stroke="{stroke}" stroke-width="1.3"/>']
    baseline = top + PADDING + 10
    for i, line in enumerate(box.lines):
        css = "name" if i == 0 else "detail"
        weight = ' font-weight="bold"' if i == 0 else ' fill="#555"'
        parts.append(f'<text class="{css}" x="{left + PADDING:.1f}" y="{baseline:.1f}"{weight}>{escape(line)}</text>')
        baseline += LINE_HEIGHT
    for i in range(box.live_lines):
        parts.append(f'<text class="stats" data-line="{i}" x="{left + PADDING:.1f}" y="{baseline:.1f}" '
                     f'fill="#222"></text>')
        baseline += LINE_HEIGHT
    parts.append('</g>')
    return "".join(parts)
