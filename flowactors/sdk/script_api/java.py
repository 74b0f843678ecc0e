"""The Java classes (JDK, Commons IO, Jython) that published NiFi scripts import, for Python 3.

Each is the small part of the Java API those scripts use, with Java's meaning: an
``InputStream``'s ``read()`` gives a byte as an int and -1 at the end, ``read(buf)`` fills a
``bytearray`` and gives the count (-1 at the end); an ``OutputStream``'s ``write`` takes bytes, a
``bytearray``, an int (one byte) or a str (encoded as UTF-8: Jython's str held bytes). Text
decoded from bytes (``IOUtils.toString``, ``StringUtil.fromBytes``, readers) is a Python str; bytes
that do not decode in the charset are kept as they were (``surrogateescape``), so what is read and
written back again is unchanged. ``MODULES`` maps each Java package to the names it offers.
"""

from __future__ import annotations

import codecs
import io
from typing import Any, BinaryIO, Iterator

from flowactors.sdk.session import CHUNK

_KEEP = "surrogateescape"


class Charset:
    """A character set (``java.nio.charset.Charset``): its Java name and the Python codec."""

    def __init__(self, name: str):
        self._name = name
        self.codec = codecs.lookup(name).name

    def name(self) -> str:
        return self._name

    displayName = name
    toString = name

    def __str__(self) -> str:
        return self._name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Charset) and other.codec == self.codec

    def __hash__(self) -> int:
        return hash(self.codec)

    @staticmethod
    def forName(name: str) -> "Charset":
        return Charset(name)

    @staticmethod
    def defaultCharset() -> "Charset":
        return StandardCharsets.UTF_8


class StandardCharsets:
    UTF_8, US_ASCII, ISO_8859_1 = Charset("UTF-8"), Charset("US-ASCII"), Charset("ISO-8859-1")
    UTF_16, UTF_16BE, UTF_16LE = Charset("UTF-16"), Charset("UTF-16BE"), Charset("UTF-16LE")


def _codec(charset: Any) -> str:
    """The Python codec of a Charset, a charset name, or (None) UTF-8."""
    if charset is None:
        return "utf-8"
    return charset.codec if isinstance(charset, Charset) else Charset(str(charset)).codec


def _bytes(data: Any) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8", _KEEP)
    if isinstance(data, int):
        return bytes([data & 0xFF])
    return bytes(data)


class InputStream:
    """A content stream as ``java.io.InputStream`` (see the module docstring). Python's
    ``read(n)``-less use is Java's; ``readAllBytes`` gives the rest as bytes."""

    def __init__(self, stream: BinaryIO):
        self._stream = stream

    def read(self, buffer: bytearray | None = None, offset: int = 0, length: int | None = None) -> int:
        if buffer is None:
            byte = self._stream.read(1)
            return byte[0] if byte else -1
        length = len(buffer) - offset if length is None else length
        if length == 0:
            return 0
        data = self._stream.read(length)
        if not data:
            return -1
        buffer[offset:offset + len(data)] = data
        return len(data)

    def readAllBytes(self) -> bytes:
        return self._stream.read()

    def readNBytes(self, count: int) -> bytes:
        return self._stream.read(count)

    def skip(self, count: int) -> int:
        return len(self._stream.read(count))

    def transferTo(self, out: "OutputStream") -> int:
        copied = 0
        while chunk := self._stream.read(CHUNK):
            out.write(chunk)
            copied += len(chunk)
        return copied

    def available(self) -> int:
        return 0

    def close(self) -> None:
        """Nothing to do: the session closes the content when the callback returns."""

    def raw(self) -> BinaryIO:
        """The Python binary stream underneath (for ``io``-based code)."""
        return self._stream


class OutputStream:
    """A content stream as ``java.io.OutputStream`` (see the module docstring)."""

    def __init__(self, stream: BinaryIO):
        self._stream = stream

    def write(self, data: Any, offset: int = 0, length: int | None = None) -> None:
        data = _bytes(data)
        self._stream.write(data if (offset, length) == (0, None) else
                           data[offset:offset + (len(data) - offset if length is None else length)])

    def flush(self) -> None:
        """Nothing to do: the session flushes what was written."""

    close = flush

    def raw(self) -> BinaryIO:
        return self._stream


def _raw_in(stream: Any) -> BinaryIO:
    return stream.raw() if isinstance(stream, InputStream) else stream


class IOUtils:
    """``org.apache.commons.io.IOUtils``: streams to text and bytes, and copies."""

    @staticmethod
    def toString(stream: Any, charset: Any = None) -> str:
        if isinstance(stream, (bytes, bytearray)):
            return bytes(stream).decode(_codec(charset), _KEEP)
        return _raw_in(stream).read().decode(_codec(charset), _KEEP)

    @staticmethod
    def toByteArray(stream: Any) -> bytes:
        return _raw_in(stream).read()

    @staticmethod
    def readLines(stream: Any, charset: Any = None) -> list[str]:
        return IOUtils.toString(stream, charset).splitlines()

    @staticmethod
    def copy(source: Any, out: Any) -> int:
        """The rest of ``source`` written to ``out`` (any stream with ``write``), a chunk at a time;
        how many bytes, as Java's."""
        return InputStream(_raw_in(source)).transferTo(out)

    @staticmethod
    def write(data: Any, out: Any, charset: Any = None) -> None:
        out.write(data.encode(_codec(charset), _KEEP) if isinstance(data, str) else bytes(data))

    @staticmethod
    def closeQuietly(*closeables: Any) -> None:
        for closeable in closeables:
            try:
                if closeable is not None:
                    closeable.close()
            except Exception:
                pass


class InputStreamReader:
    """``java.io.InputStreamReader``: a stream's text in a charset (default UTF-8)."""

    def __init__(self, stream: Any, charset: Any = None):
        self._text = io.TextIOWrapper(_BytesReader(_raw_in(stream)), encoding=_codec(charset), errors=_KEEP,
                                      newline="")

    def read(self) -> int:
        char = self._text.read(1)
        return ord(char) if char else -1

    def readLine(self) -> str | None:
        """The next line without its ending (\\n, \\r\\n or \\r), None at the end."""
        line = self._text.readline()
        if not line:
            return None
        if line.endswith("\r") and not line.endswith("\r\n"):
            return line[:-1]
        return line[:-2] if line.endswith("\r\n") else line.rstrip("\n")

    def lines(self) -> Iterator[str]:
        while (line := self.readLine()) is not None:
            yield line

    def close(self) -> None:
        """Nothing to do: the session owns the stream."""


#: ``BufferedReader(reader)`` reads as the reader does
def BufferedReader(reader: InputStreamReader, size: int = 0) -> InputStreamReader:  # noqa: N802 (Java's name)
    return reader


class _BytesReader(io.RawIOBase):
    """A content stream as ``io.TextIOWrapper`` needs it (readable, never closed by it)."""

    def __init__(self, stream: BinaryIO):
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._stream.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


class OutputStreamWriter:
    """``java.io.OutputStreamWriter`` (and ``BufferedWriter`` over it): text to a stream."""

    def __init__(self, out: Any, charset: Any = None):
        self._out = out
        self._codec = _codec(charset)

    def write(self, text: Any, offset: int = 0, length: int | None = None) -> None:
        text = chr(text) if isinstance(text, int) else str(text)
        if (offset, length) != (0, None):
            text = text[offset:offset + (len(text) - offset if length is None else length)]
        self._out.write(text.encode(self._codec, _KEEP))

    def newLine(self) -> None:
        self.write("\n")

    def flush(self) -> None:
        """Nothing to do: each write reaches the stream."""

    close = flush


def BufferedWriter(writer: OutputStreamWriter, size: int = 0) -> OutputStreamWriter:  # noqa: N802 (Java's name)
    return writer


class ByteArrayOutputStream:
    """``java.io.ByteArrayOutputStream``: bytes gathered in memory."""

    def __init__(self, size: int = 0):
        self._buffer = bytearray()

    def write(self, data: Any, offset: int = 0, length: int | None = None) -> None:
        data = _bytes(data)
        self._buffer += data[offset:offset + (len(data) - offset if length is None else length)]

    def toByteArray(self) -> bytes:
        return bytes(self._buffer)

    def toString(self, charset: Any = None) -> str:
        return bytes(self._buffer).decode(_codec(charset), _KEEP)

    def size(self) -> int:
        return len(self._buffer)

    def flush(self) -> None:
        """Nothing to do."""

    close = flush


def ByteArrayInputStream(data: Any) -> InputStream:  # noqa: N802 (Java's name)
    return InputStream(io.BytesIO(_bytes(data)))


class StringUtil:
    """``org.python.core.util.StringUtil``: Jython's bytes <-> str."""

    @staticmethod
    def fromBytes(data: Any, offset: int = 0, length: int | None = None) -> str:
        data = bytes(data)
        if (offset, length) != (0, None):
            data = data[offset:offset + (len(data) - offset if length is None else length)]
        return data.decode("utf-8", _KEEP)

    @staticmethod
    def toBytes(text: str) -> bytes:
        return text.encode("utf-8", _KEEP)


def zeros(length: int, kind: str = "b") -> bytearray:
    """``jarray.zeros(n, "b")``: a byte buffer for ``InputStream.read``."""
    if kind not in ("b", "B"):
        raise TypeError(f"jarray.zeros of type {kind!r}: only byte arrays ('b') are offered")
    return bytearray(length)


class Optional:
    """``java.util.Optional``: what a scripted lookup may return (unwrapped to the value or None)."""

    def __init__(self, value: Any = None):
        self._value = value

    @staticmethod
    def of(value: Any) -> "Optional":
        if value is None:
            raise ValueError("Optional.of(None); use Optional.ofNullable")
        return Optional(value)

    @staticmethod
    def ofNullable(value: Any) -> "Optional":
        return Optional(value)

    @staticmethod
    def empty() -> "Optional":
        return Optional()

    def isPresent(self) -> bool:
        return self._value is not None

    def isEmpty(self) -> bool:
        return self._value is None

    def get(self) -> Any:
        if self._value is None:
            raise LookupError("Optional.get() of an empty Optional")
        return self._value

    def orElse(self, other: Any) -> Any:
        return other if self._value is None else self._value


class TimeUnit:
    """``java.util.concurrent.TimeUnit`` for ``asTimePeriod``."""

    def __init__(self, seconds: float):
        self.seconds = seconds


TimeUnit.NANOSECONDS, TimeUnit.MICROSECONDS, TimeUnit.MILLISECONDS = TimeUnit(1e-9), TimeUnit(1e-6), TimeUnit(1e-3)
TimeUnit.SECONDS, TimeUnit.MINUTES, TimeUnit.HOURS, TimeUnit.DAYS = (TimeUnit(1), TimeUnit(60), TimeUnit(3600),
                                                                    TimeUnit(86400))


#: each Java package -> its classes offered to scripts
MODULES: dict[str, dict[str, Any]] = {
    "java.io": {"InputStream": InputStream, "OutputStream": OutputStream, "InputStreamReader": InputStreamReader,
                "BufferedReader": BufferedReader, "OutputStreamWriter": OutputStreamWriter,
                "BufferedWriter": BufferedWriter, "ByteArrayOutputStream": ByteArrayOutputStream,
                "ByteArrayInputStream": ByteArrayInputStream},
    "java.nio.charset": {"StandardCharsets": StandardCharsets, "Charset": Charset},
    "java.util": {"Optional": Optional},
    "java.util.concurrent": {"TimeUnit": TimeUnit},
    "org.apache.commons.io": {"IOUtils": IOUtils},
    "org.python.core.util": {"StringUtil": StringUtil},
    "jarray": {"zeros": zeros},
}
