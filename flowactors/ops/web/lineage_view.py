"""The one place the flow page turns a lineage into a picture.

The page's contract with the picture (docs/ui.md): an SVG document; a collapsed fork/join group
is an element with class ``lineage-group`` and ``data-group="<id>"``; clicking it asks for the
same lineage again with that id in ``expanded``. Today's renderer (``lineage_render.to_svg``)
draws every node and makes no groups, so ``expanded`` has nothing to open yet; a grouping renderer
takes its place here alone.
"""

from __future__ import annotations

from collections.abc import Set

from flowactors.ops.lineage_render import to_svg
from repositories.provenance.lineage import Lineage


def lineage_svg(lineage: Lineage, expanded: Set[str] = frozenset()) -> str:
    """The lineage as SVG, with the groups named in ``expanded`` drawn open."""
    return to_svg(lineage)
