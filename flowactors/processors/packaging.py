"""NiFi's packaging formats: FlowFile Stream v3, and TAR and ZIP archives as NiFi names their entries.

NiFi bundles FlowFiles with MergeContent and opens bundles with UnpackContent; a bundle that
travels between a NiFi node and flowactors must mean the same thing on both sides. The byte layout
and the naming rules live here, once: MergeContent writes with this module, UnpackContent reads
with it. docs/formats/flowfile-stream-v3.md describes the v3 layout byte by byte.

Guarantees:

* ``write_flowfile`` writes exactly the bytes NiFi's v3 packager writes for the same attributes (in
  the same order) and content; ``FlowFileStreamReader`` reads every stream NiFi writes.
* Contents are streamed a chunk at a time, never held whole; only attribute names and values
  (which a FlowFile holds in memory anyway) are read into memory, and a length read from the
  stream is checked against what is left of a seekable stream before anything is read for it.
* A stream cut short or not in its format raises ``PackageError`` (a ``ValueError``) saying what
  was expected and, for v3 and the end of a TAR archive, at which byte; never a half-read result
  passed off as whole.
"""

from __future__ import annotations

import io
import lzma
import posixpath
import struct
import tarfile
import time
import zipfile
import zlib
from contextlib import contextmanager
from datetime import datetime
from typing import BinaryIO, Callable, Iterator, Mapping, NamedTuple

from flowactors.processors._common import CHUNK, NIFI_TIME_FORMAT, copy_bytes, permission_text, read_prefix

MAGIC = b"NiFiFF3"
FLOWFILE_V3_MIME_TYPE = "application/flowfile-v3"
TAR_MIME_TYPE = "application/tar"
ZIP_MIME_TYPE = "application/zip"
V3, TAR, ZIP = "FlowFile Stream v3", "TAR", "ZIP"

#: a length of this value or more is written as this escape, then the length in 4 bytes
LENGTH_ESCAPE = 0xFFFF
#: the longest attribute name or value, and the most attributes (NiFi reads lengths as a Java int)
MAX_FIELD_LENGTH = 2**31 - 1
#: a TAR entry's mode when the FlowFile has no valid tar.permissions (NiFi's TAR library's default)
DEFAULT_TAR_MODE = 0o644


class PackageError(ValueError):
    """A package that cannot be read (cut short, corrupt, not in its format) or written.

    ``offset`` is the byte where the problem was found, when known. The message is the only
    positional argument, so the error pickles.
    """

    offset: int | None = None

    @classmethod
    def at(cls, kind: str, offset: int, problem: str) -> "PackageError":
        error = cls(f"{kind}: at byte {offset}: {problem}")
        error.offset = offset
        return error


# ------------------------------------------------------------------------ FlowFile Stream v3
def _length(count: int) -> bytes:
    if count < LENGTH_ESCAPE:
        return struct.pack(">H", count)
    if count > MAX_FIELD_LENGTH:
        raise PackageError(f"{V3}: a field of {count} bytes is longer than the format allows ({MAX_FIELD_LENGTH})")
    return struct.pack(">HI", LENGTH_ESCAPE, count)


def _text(value: str) -> bytes:
    data = value.encode("utf-8", errors="replace")  # as Java: a lone surrogate becomes '?'
    return _length(len(data)) + data


def write_flowfile(out: BinaryIO, attributes: Mapping[str, str], content: BinaryIO, size: int) -> None:
    """Append one FlowFile to a v3 stream: its header, then ``size`` bytes copied from ``content``."""
    header = [MAGIC, _length(len(attributes))]
    for key, value in attributes.items():
        header += (_text(key), _text(value))
    header.append(struct.pack(">q", size))
    out.write(b"".join(header))
    copied = copy_bytes(content, out, size)
    if copied < size:
        raise PackageError(f"{V3}: the content ended after {copied} of its {size} bytes")


class PackagedFlowFile(NamedTuple):
    """One FlowFile's header in a v3 stream; its content is ``size`` bytes from ``offset``."""

    attributes: dict[str, str]
    offset: int
    size: int


class FlowFileStreamReader:
    """Reads a v3 stream one FlowFile at a time.

    Iterating yields each FlowFile's header; ``read`` reads that FlowFile's content, and whatever
    of it was not read is skipped (by seeking, when the stream can) on the way to the next header.
    Offsets count from where the stream was when the reader was made. The stream may end only
    between two FlowFiles (an empty stream holds none).
    """

    def __init__(self, stream: BinaryIO):
        self._stream = stream
        self._position = 0
        self._remaining = 0  # bytes of the current content not read yet
        self._end: int | None = None  # the stream's length, when it can seek
        if stream.seekable():
            start = stream.tell()
            self._end = stream.seek(0, io.SEEK_END) - start
            stream.seek(start)

    def __iter__(self) -> Iterator[PackagedFlowFile]:
        while (packaged := self.next()) is not None:
            yield packaged

    def next(self) -> PackagedFlowFile | None:
        """The next FlowFile's header, or None where the stream ends."""
        self._skip_content()
        start = self._position
        magic = read_prefix(self._stream, len(MAGIC))
        if not magic:
            return None
        if len(magic) < len(MAGIC):
            raise self._error(start, f"the magic header {MAGIC.decode()} (7 bytes)",
                              f"the end of the stream after {len(magic)} bytes")
        if magic != MAGIC:
            raise self._error(start, f"the magic header {MAGIC.decode()}", repr(magic))
        self._position += len(magic)
        count = self._field_length("the number of attributes")
        attributes: dict[str, str] = {}
        for index in range(1, count + 1):
            key = self._field_text(f"the name of attribute {index}")
            attributes[key] = self._field_text(f"the value of attribute {key!r}")
        at = self._position
        (size,) = struct.unpack(">q", self._take(8, "the content length (8 bytes)"))
        if size < 0:
            raise self._error(at, "a content length of 0 or more", str(size))
        if self._end is not None and self._position + size > self._end:
            raise self._error(self._position, f"{size} bytes of content",
                              f"the end of the stream after {self._end - self._position}")
        self._remaining = size
        return PackagedFlowFile(attributes, self._position, size)

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all that are left, when negative) of the current FlowFile's content."""
        wanted = self._remaining if size < 0 else min(size, self._remaining)
        if not wanted:
            return b""
        data = self._stream.read(wanted)
        if not data:
            raise self._error(self._position, f"{self._remaining} more bytes of content", "the end of the stream")
        self._position += len(data)
        self._remaining -= len(data)
        return data

    def _skip_content(self) -> None:
        if self._end is not None:  # the header checked that the content is all there
            self._stream.seek(self._remaining, io.SEEK_CUR)
            self._position += self._remaining
            self._remaining = 0
        while self._remaining:
            self.read(CHUNK)

    def _take(self, count: int, what: str) -> bytes:
        at = self._position
        if self._end is not None and at + count > self._end:
            raise self._error(at, what, f"the end of the stream after {self._end - at} bytes")
        data = read_prefix(self._stream, count)
        if len(data) < count:
            raise self._error(at, what, f"the end of the stream after {len(data)} bytes")
        self._position += count
        return data

    def _field_length(self, what: str) -> int:
        (length,) = struct.unpack(">H", self._take(2, f"the length of {what} (2 bytes)"))
        if length == LENGTH_ESCAPE:
            at = self._position
            (length,) = struct.unpack(">I", self._take(4, f"the length of {what} (4 bytes after FF FF)"))
            if length > MAX_FIELD_LENGTH:
                raise self._error(at, f"a length of {what} below 2^31", str(length))
        return length

    def _field_text(self, what: str) -> str:
        length = self._field_length(what)
        return self._take(length, f"{what} ({length} bytes)").decode("utf-8", errors="replace")

    @staticmethod
    def _error(offset: int, expected: str, found: str) -> PackageError:
        return PackageError.at(V3, offset, f"expected {expected}, found {found}")


# ------------------------------------------------------------------------ TAR and ZIP
def entry_name(attributes: Mapping[str, str], keep_path: bool) -> str:
    """The archive entry MergeContent makes of a FlowFile: its filename, with Keep Path behind its
    ``path`` (a leading ``.`` folder left out, as NiFi does)."""
    filename = attributes.get("filename", "")
    if not keep_path:
        return filename
    path = attributes.get("path", "")
    folders = [folder for folder in path.split("/") if folder]
    if folders[:1] == ["."]:
        folders = folders[1:]
    if not folders:
        return filename
    return ("/" if path.startswith("/") else "") + "/".join(folders) + "/" + filename


def tar_mode(permissions: str | None) -> int:
    """A TAR entry's mode from a ``tar.permissions`` value: three octal digits (``640``), else 644."""
    if permissions and len(permissions) == 3 and all(c in "01234567" for c in permissions):
        return int(permissions, 8)
    return DEFAULT_TAR_MODE


class TarPackager:
    """Writes one TAR archive, streaming, in the GNU format (long names as NiFi writes them).

    Use as a context manager: leaving it normally ends the archive; leaving it with an exception
    does not (the output is to be thrown away).
    """

    def __init__(self, out: BinaryIO):
        self._tar = tarfile.open(fileobj=out, mode="w|", format=tarfile.GNU_FORMAT, encoding="utf-8",
                                 errors="replace")

    def __enter__(self) -> "TarPackager":
        return self

    def __exit__(self, kind, error, traceback) -> None:
        self._tar.__exit__(kind, error, traceback)

    def add(self, name: str, content: BinaryIO, size: int, mode: int = DEFAULT_TAR_MODE,
            mtime: float | None = None) -> None:
        """An entry of ``size`` bytes from ``content``; ``mtime`` (epoch seconds) defaults to now.
        A leading ``/`` is left out of the name, as NiFi's TAR library does."""
        info = tarfile.TarInfo(name.lstrip("/"))
        info.size, info.mode = size, mode
        info.mtime = time.time() if mtime is None else mtime
        self._tar.addfile(info, content)


class ZipPackager:
    """Writes one ZIP archive, streaming: DEFLATE at ``level``, sizes and CRCs in data descriptors
    after each entry's data (as NiFi's ZIP writer, which does not seek back either), entry times now."""

    def __init__(self, out: BinaryIO, level: int):
        self._zip = zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=level)

    def __enter__(self) -> "ZipPackager":
        return self

    def __exit__(self, kind, error, traceback) -> None:
        self._zip.__exit__(kind, error, traceback)

    def add(self, name: str, content: BinaryIO, size: int) -> None:
        with self._zip.open(name, "w", force_zip64=size * 1.05 > zipfile.ZIP64_LIMIT) as entry:
            copied = copy_bytes(content, entry, size)
        if copied < size:
            raise PackageError(f"{ZIP}: the content of {name!r} ended after {copied} of its {size} bytes")


class ArchiveEntry(NamedTuple):
    """A file in a TAR or ZIP archive, with the attributes NiFi's UnpackContent gives it."""

    kind: str
    name: str
    attributes: dict[str, str]
    size: int
    #: where the entry's bytes lie, as they are, in the archive (TAR), so that a FlowFile can
    #: reference them; None when they must be decoded (``copy_to``)
    offset: int | None
    open: Callable[[], BinaryIO]

    def copy_to(self, out: BinaryIO) -> None:
        """Write the entry's bytes to ``out``, a chunk at a time."""
        with _reading(self.kind, f"entry {self.name!r}: "):
            with self.open() as source:
                copied = copy_bytes(source, out, self.size)
        if copied < self.size:
            raise PackageError(f"{self.kind}: entry {self.name!r} ended after {copied} of its {self.size} bytes")


#: what the standard library raises for a damaged archive (its header, its data, its compression)
_ARCHIVE_ERRORS = (tarfile.TarError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, lzma.LZMAError,
                   EOFError, NotImplementedError, OSError, ValueError, struct.error, OverflowError)


@contextmanager
def _reading(kind: str, where: str = "") -> Iterator[None]:
    try:
        yield
    except PackageError:
        raise
    except _ARCHIVE_ERRORS as err:
        raise PackageError(f"{kind}: {where}{err}") from err


def _split(name: str) -> tuple[str, str]:
    """(parent folder without a trailing /, file name) of an entry name."""
    parent, filename = posixpath.split(name)
    return parent.rstrip("/"), filename


def read_tar(stream: BinaryIO) -> Iterator[ArchiveEntry]:
    """The files of a plain TAR archive in a seekable stream (folders left out), in archive order.

    Offsets count from where the stream was. An archive may end with its end-of-archive blocks or
    without them, but not with bytes that are no header.
    """
    start = stream.tell()
    length = stream.seek(0, io.SEEK_END) - start
    stream.seek(start)
    with _reading(TAR), tarfile.open(fileobj=stream, mode="r:", encoding="utf-8", errors="replace") as archive:
        for member in archive:
            if member.isdir():
                continue
            parent, filename = _split(member.name)
            # as NiFi's UnpackContent writes it: in the local zone
            modified = datetime.fromtimestamp(member.mtime).astimezone().strftime(NIFI_TIME_FORMAT)
            attributes = {"filename": filename, "path": parent + "/" if parent else "/",
                          "file.permissions": permission_text(member.mode), "file.owner": member.uname,
                          "file.group": member.gname, "file.lastModifiedTime": modified,
                          "file.creationTime": modified}
            size = member.size if member.isreg() else 0  # links, devices and fifos hold no data
            offset = None if member.issparse() else member.offset_data - start  # sparse: size is unpacked
            if offset is not None and offset + size > length:  # tarfile would see it only after yielding
                raise PackageError.at(TAR, offset, f"expected the {size} bytes of {member.name!r}, found the end "
                                                   f"of the archive after {length - offset}")
            yield ArchiveEntry(TAR, member.name, attributes, size, offset,
                               lambda member=member: archive.extractfile(member))
        end = archive.offset - start  # where tarfile stopped: the end blocks, the stream's end or junk
    stream.seek(start + end)
    if read_prefix(stream, tarfile.BLOCKSIZE).strip(b"\0"):
        raise PackageError.at(TAR, end, "expected an entry's header or the end of the archive, found neither")


def read_zip(stream: BinaryIO) -> Iterator[ArchiveEntry]:
    """The files of a ZIP archive in a seekable stream (folders left out), in the order of its
    central directory. Encrypted entries are refused (there is no way to give a password)."""
    with _reading(ZIP), zipfile.ZipFile(stream) as archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            if info.flag_bits & 0x1:
                raise PackageError(f"{ZIP}: entry {info.filename!r} is encrypted, which is not supported")
            parent, filename = _split(info.filename)
            attributes = {"filename": filename, "path": parent or "/", "file.encryptionMethod": "NONE"}
            yield ArchiveEntry(ZIP, info.filename, attributes, info.file_size, None,
                               lambda info=info: archive.open(info))
