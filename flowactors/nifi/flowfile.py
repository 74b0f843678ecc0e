"""The FlowFile a NiFi Python transform receives, over a flowactors session.

NiFi hands ``transform`` an ``InputFlowFile`` (Java's ``StandardInputFlowFile``): the content as
bytes or as a reader of text lines, the size and the attributes. This one reads through the
session; a reader opened by the processor is closed when its ``transform`` returns.
"""

from __future__ import annotations

import io
from contextlib import ExitStack
from typing import Iterator

from flowactors.sdk import FlowFile


class ContentReader:
    """The content as UTF-8 text, read a line at a time (Java's ``BufferedReader``): ``readLine``
    returns a line without its terminator (``\\n``, ``\\r\\n`` or ``\\r``), None at the end."""

    def __init__(self, stream):
        self._text = io.TextIOWrapper(stream, encoding="utf-8", newline=None)

    def readLine(self) -> str | None:
        line = self._text.readline()
        if not line:
            return None
        return line[:-1] if line.endswith("\n") else line

    def lines(self) -> Iterator[str]:
        while (line := self.readLine()) is not None:
            yield line

    __iter__ = lines

    def read(self, size: int = -1) -> str:
        return self._text.read(size)

    def ready(self) -> bool:
        return True

    def close(self) -> None:
        self._text.detach()


class InputFlowFile:
    """One FlowFile taken by the session, as NiFi's Python processors see it."""

    def __init__(self, session, flowfile: FlowFile):
        self.session = session
        self.flowfile = flowfile
        self._open = ExitStack()

    def getContentsAsBytes(self) -> bytes:
        return self.session.read_bytes(self.flowfile)

    def getContentsAsReader(self) -> ContentReader:
        stream = self._open.enter_context(self.session.read(self.flowfile))
        reader = ContentReader(stream)
        self._open.callback(reader.close)
        return reader

    def getSize(self) -> int:
        return self.flowfile.size

    def getAttribute(self, name: str) -> str | None:
        return self.flowfile.attributes.get(name)

    def getAttributes(self) -> dict[str, str]:
        return dict(self.flowfile.attributes)

    def close(self) -> None:
        """Close what the processor opened (called when ``transform`` returned)."""
        self._open.close()

    def __str__(self) -> str:
        return (f"FlowFile[id={self.flowfile.uuid}, filename={self.flowfile.attributes.get('filename')}, "
                f"size={self.flowfile.size}]")
