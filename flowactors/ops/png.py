"""SVG pictures as PNG, for every picture the operations tools draw (lineage, the flow's graph),
and the check every picture's path passes before any work.

The renderer is resvg, through the ``resvg-py`` wheel (a dependency: no system library to
install). ``check_picture`` says before any work whether a picture can be written at a path
(``require_png`` whether PNG can be written here); ``svg_to_png`` rasterises at the SVG's own
size on white.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

PNG_PACKAGE = "resvg_py"


class PictureError(RuntimeError):
    """The picture cannot be written there or in that format here (the message says why)."""


class PngError(PictureError):
    """PNG cannot be written here, or resvg could not draw the picture (the message says which)."""


def check_picture(path: str | os.PathLike, formats: Sequence[str], what: str) -> Path:
    """Refuse, before any work, a path a picture of ``what`` ("a flow") cannot be written to: a
    suffix not in ``formats`` or a folder that does not exist (``PictureError``), or .png without
    its renderer (``PngError``). Returns the path."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in formats:
        raise PictureError(f"cannot draw {what} as '{path.name}': the file name must end in one of "
                           f"{', '.join(formats)}")
    if not path.parent.is_dir():
        raise PictureError(f"cannot write {path}: the folder {path.parent} does not exist")
    if suffix == ".png":
        require_png()
    return path


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
