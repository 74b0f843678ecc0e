"""SVG pictures as PNG, for every picture the operations tools draw (lineage, the flow's graph).

The renderer is resvg, through the ``resvg-py`` wheel (a dependency: no system library to
install). ``require_png`` says before any work whether PNG can be written here; ``svg_to_png``
rasterises at the SVG's own size on white.
"""

from __future__ import annotations

import importlib.util

PNG_PACKAGE = "resvg_py"


class PngError(RuntimeError):
    """PNG cannot be written here, or resvg could not draw the picture (the message says which)."""


def require_png() -> None:
    """``PngError`` when the renderer is not installed (said before any work is done)."""
    if importlib.util.find_spec(PNG_PACKAGE) is None:
        raise PngError("writing a .png picture needs the Python package resvg-py (pip install "
                       "'resvg-py>=0.5,<0.6': a wheel, no system library), which is not installed; "
                       "write .svg instead (any browser shows it)")


def svg_to_png(svg: str) -> bytes:
    """``svg`` rendered by resvg at its own size, on a white background."""
    require_png()
    import resvg_py

    try:
        return bytes(resvg_py.svg_to_bytes(svg_string=svg, background="white"))
    except ValueError as err:
        raise PngError(f"resvg could not draw the picture: {err}") from None
