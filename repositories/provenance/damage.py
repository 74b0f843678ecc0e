"""Damaged event files: finding their damaged blocks, and keeping track of them while reading.

An event file (eventfile.py) is a header and compressed blocks, each with its own checksum, so a
damaged block (a bad disk sector, a partial copy, a file cut short) costs only its own events: the
readers step over it and the repository names it (docs/provenance.md, "Damaged event files").

* ``check_structure``: what opening a repository checks of every event file (its header, and that
  every block the table of contents lists starts inside the file and ends before the next one):
  one 32-byte read a block, so a file cut short or a damaged block length is found at start-up.
  A flipped byte inside a block's compressed bytes is found by the read that meets it
  (``DamagedBlockError``) and by ``verify_blocks``, which ``flowactors provenance repair`` runs.
* ``rebuild_toc``: a lost table of contents rebuilt by walking the blocks, stepping over damaged
  ones to the next block that reads (found by its zstd frame magic and checksum).
* ``DamageLog``: the damaged blocks a repository met (at open or by a read), each once, with the
  ids reads asked for in them; ``warning`` says it in one line, with the command that repairs it.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import zstandard

from repositories.provenance.event import FIELD_INDEX, ProvenanceFormatError, decode_index_columns
from repositories.provenance.eventfile import (
    BLOCK_HEADER_SIZE,
    EVENT_FILE_VERSION,
    FILE_HEADER_SIZE,
    READ_VERSIONS,
    ZSTD_FRAME_MAGIC,
    DamagedBlockError,
    TableOfContents,
    block_length,
    check_header,
    checked_entries,
    read_block,
)

log = logging.getLogger(__name__)

_TIMESTAMP = FIELD_INDEX["timestamp"]
#: damaged blocks a one-line summary describes; it counts the others
_DESCRIBED = 4


def repair_command(root: Path) -> str:
    """The command that repairs the repository kept at ``root`` (``<repository>/provenance``)."""
    return f"flowactors provenance repair --repository {Path(root).parent}"


def repair_advice(root: Path) -> str:
    """What to do about damaged event files, naming the command."""
    return f"run '{repair_command(root)}' to keep what can be read and drop the damaged blocks"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


@dataclass(frozen=True, slots=True)
class DamagedBlock:
    """A block of an event file that cannot be read, and the ids it held as far as they are known
    (from the table of contents, or the readable blocks around it)."""

    path: str
    offset: int            # 0: the file's header, so every block of the file
    problem: str           # what is wrong: "fails its checksum (corrupt file)", "is cut short (...)"
    first_id: int | None
    last_id: int | None

    def describe(self) -> str:
        """E.g. "block at offset 1012 (events 77-116) fails its checksum (corrupt file)"."""
        if self.first_id is None:
            ids = ""
        elif self.last_id is None:
            ids = f" (events from {self.first_id})"
        else:
            ids = f" (events {self.first_id}-{self.last_id})"
        if self.offset == 0:
            return f"header{ids}: {self.problem}"
        return f"block at offset {self.offset}{ids} {self.problem}"


def describe_blocks(blocks: Iterable[DamagedBlock]) -> str:
    """Damaged blocks of one file, in offset order: "block at ..., block at ..."."""
    return ", ".join(b.describe() for b in sorted(blocks, key=lambda b: b.offset))


def describe_file(path: str, blocks: Iterable[DamagedBlock]) -> str:
    """One event file's damaged blocks: "<path>: block at ..., block at ..."."""
    return f"{path}: {describe_blocks(blocks)}"


class DamageLog:
    """The damaged blocks a repository met, at open or by a read, each once (thread-safe).

    ``warn``: log a warning the first time a read meets a block (a running flow's repository;
    what recovery finds at open it reports itself; a read-only repository leaves saying it to its
    caller, the commands, which print ``warning``)."""

    def __init__(self, root: Path, *, warn: bool):
        self.root = Path(root)
        self.warn = warn
        self._blocks: dict[tuple[str, int], DamagedBlock] = {}
        self._unread: set[int] = set()
        self._lock = threading.Lock()

    def note(self, err: DamagedBlockError, toc: TableOfContents | None, wanted: Iterable[int] = ()) -> None:
        """A read met a damaged block (``wanted``: the ids it asked for there)."""
        first, last = toc.span_at(err.offset) if toc is not None else (None, None)
        block = DamagedBlock(err.path, err.offset, err.problem, first, last)
        if self.add(block, wanted) and self.warn:
            log.warning("provenance: damaged event file %s; its events there cannot be read, the rest can; %s",
                        describe_file(block.path, [block]), repair_advice(self.root))

    def add(self, block: DamagedBlock, wanted: Iterable[int] = ()) -> bool:
        """Note a damaged block (``wanted``: ids asked for in it); whether it is new."""
        with self._lock:
            key = (block.path, block.offset)
            new = key not in self._blocks
            if new:
                self._blocks[key] = block
            self._unread.update(wanted)
        return new

    def blocks(self, path: str | None = None) -> list[DamagedBlock]:
        """The damaged blocks met (of one file, with ``path``), by file and offset."""
        with self._lock:
            found = [b for b in self._blocks.values() if path is None or b.path == path]
        return sorted(found, key=lambda b: (b.path, b.offset))

    def unread(self) -> list[int]:
        """The ids reads asked for that lie in damaged blocks, in order."""
        with self._lock:
            return sorted(self._unread)

    def forget(self, path: str) -> None:
        """The file was repaired or deleted: its blocks are no longer damaged."""
        with self._lock:
            for key in [k for k in self._blocks if k[0] == path]:
                del self._blocks[key]

    def warning(self) -> str | None:
        """One line naming and counting the damaged blocks and files met, the ids asked for in
        them, and the command that repairs them; None when none was met."""
        blocks = self.blocks()
        if not blocks:
            return None
        files: dict[str, list[DamagedBlock]] = {}
        for block in blocks[:_DESCRIBED]:
            files.setdefault(block.path, []).append(block)
        described = "; ".join(describe_file(path, found) for path, found in files.items())
        if len(blocks) > _DESCRIBED:
            described += f"; and {len(blocks) - _DESCRIBED} more"
        paths = {b.path for b in blocks}
        text = (f"provenance: {_plural(len(blocks), 'damaged block')} in {_plural(len(paths), 'event file')} "
                f"cannot be read: {described}")
        unread = self.unread()
        if unread:
            shown = ", ".join(map(str, unread[:10])) + (", ..." if len(unread) > 10 else "")
            text += f"; {_plural(len(unread), 'event')} asked for {'is' if len(unread) == 1 else 'are'} in them " \
                    f"(ids {shown})"
        return f"{text}; {repair_advice(self.root)}"


def check_structure(path: Path, toc: TableOfContents) -> list[DamagedBlock]:
    """The damage opening a repository finds in an event file: a damaged header, or blocks that
    the file ends inside of (or before) or that run into the next block. Reads one 32-byte block
    header a block, not the blocks' bytes. An unknown version is ``ProvenanceFormatError``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        _, header = read_version(fd, path, toc.first_id)
        if header is not None:
            return [DamagedBlock(str(path), 0, header.problem, toc.first_id, toc.last_id)]
        size = os.fstat(fd).st_size
        offsets = toc.block_offsets
        found = []
        for index, offset in enumerate(offsets):
            limit = offsets[index + 1] if index + 1 < len(offsets) else size
            problem = _frame_problem(fd, offset, limit, size)
            if problem is not None:
                found.append(DamagedBlock(str(path), offset, problem, *toc.block_span(index)))
        return found
    finally:
        os.close(fd)


def _frame_problem(fd: int, offset: int, limit: int, size: int) -> str | None:
    """What is wrong with where the block at ``offset`` lies (it must end by ``limit``), or None."""
    if offset >= size:
        return f"is missing (the file ends at byte {size})"
    length = block_length(fd, offset)
    if length is None:
        return "is cut short (header)"
    if offset + length > size:
        return f"is cut short ({size - offset - BLOCK_HEADER_SIZE} of {length - BLOCK_HEADER_SIZE} bytes)"
    if offset + length > limit:
        return "runs into the next block (its length field is damaged)"
    return None


@dataclass(frozen=True, slots=True)
class IntactBlock:
    """A block that reads: where it lies and the ids its entries hold."""

    offset: int
    end: int               # one past its last byte
    first_id: int
    last_id: int
    count: int


@dataclass
class BlockWalk:
    """An event file's blocks, read whole: the intact ones and the damaged ones, in file order."""

    intact: list[IntactBlock]
    damaged: list[DamagedBlock]
    #: smallest and largest timestamp of the intact blocks' events (``rebuild_toc`` only)
    min_ts: int | None = None
    max_ts: int | None = None


def verify_blocks(path: Path, toc: TableOfContents, version: int) -> BlockWalk:
    """Read every block the table of contents lists (checksum, decompression, entry list, and its
    ids where the table says): what ``flowactors provenance repair`` checks."""
    fd = os.open(path, os.O_RDONLY)
    decompressor = zstandard.ZstdDecompressor()
    walk = BlockWalk([], [])
    try:
        for index, offset in enumerate(toc.block_offsets):
            first, last = toc.block_span(index)
            try:
                raw, length = read_block(fd, offset, str(path), decompressor)
                entries = checked_entries(raw, path, offset, version)
                if not entries:
                    raise DamagedBlockError(path, offset, "holds no event")
                held = (entries[0][0], entries[-1][0] + entries[-1][1] - 1)
                if held[0] != first or held[1] > last:
                    raise DamagedBlockError(path, offset, f"holds events {held[0]}-{held[1]}, its table of "
                                                          f"contents says {first}-{last}")
            except DamagedBlockError as err:
                walk.damaged.append(DamagedBlock(str(path), offset, err.problem, first, last))
                continue
            walk.intact.append(IntactBlock(offset, offset + length, held[0], held[1],
                                           sum(count for _, count, _ in entries)))
        return walk
    finally:
        os.close(fd)


def rebuild_toc(path: Path, file_id: int) -> tuple[TableOfContents, list[DamagedBlock]]:
    """Rebuild a lost table of contents by walking an event file's blocks (recovery): the table of
    the blocks that read, and the damaged stretches stepped over (each to the next block whose
    frame and checksum hold, or to the end), a damaged header among them (the file's id is its
    name's). ``DamagedBlockError`` for a file with no readable event; an unknown version or codec
    is refused (``ProvenanceFormatError``)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        version, header = read_version(fd, path, file_id)
        size = os.fstat(fd).st_size
        if size <= FILE_HEADER_SIZE:
            walk = BlockWalk([], [])
        else:
            with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as data:
                walk = _walk_blocks(data, fd, path, version, file_id)
    finally:
        os.close(fd)
    if not walk.intact:
        problem = header.problem if header is not None else "holds no readable block"
        raise DamagedBlockError(path, 0, problem)
    toc = TableOfContents(file_id, walk.intact[-1].last_id, sum(b.count for b in walk.intact), walk.min_ts or 0,
                          walk.max_ts or 0, tuple(b.first_id for b in walk.intact),
                          tuple(b.offset for b in walk.intact))
    if header is not None:
        walk.damaged.insert(0, DamagedBlock(str(path), 0, header.problem, toc.first_id, toc.last_id))
    return toc, walk.damaged


def read_version(fd: int, path: Path, file_id: int) -> tuple[int, DamagedBlockError | None]:
    """The version to read an event file's blocks in, and what is wrong with its header (None if
    nothing): a damaged header's version byte if this release reads it, else this release's.
    The first id must be ``file_id``, its name's. An unknown version or codec is refused
    (``ProvenanceFormatError``)."""
    try:
        first, version = check_header(fd, path)
    except DamagedBlockError as err:
        byte = os.pread(fd, 1, 4)
        return (byte[0] if byte and byte[0] in READ_VERSIONS else EVENT_FILE_VERSION), err
    if first != file_id:
        return version, DamagedBlockError(path, 0, f"header says first event {first}, its name {file_id}")
    return version, None


def _walk_blocks(data: mmap.mmap, fd: int, path: Path, version: int, first_id: int) -> BlockWalk:
    """Blocks from the end of the header on, back to back, stepping over damaged stretches (one
    ``DamagedBlock`` a stretch, holding the ids between the intact blocks around it)."""
    decompressor = zstandard.ZstdDecompressor()
    walk = BlockWalk([], [])
    offset, last, size = FILE_HEADER_SIZE, first_id - 1, len(data)
    stretch: DamagedBlockError | None = None   # the damage that started the stretch being stepped over
    while offset < size:
        try:
            raw, length = read_block(fd, offset, str(path), decompressor)
            entries = checked_entries(raw, path, offset, version)
            times = [t for first, count, batch in entries for t in _timestamps(batch, first, count, path, offset)]
        except DamagedBlockError as err:
            stretch = stretch or err
            following = _next_block(data, offset + 1)
            if following is None:
                break
            offset = following
            continue
        if stretch is not None and entries:
            walk.damaged.append(DamagedBlock(str(path), stretch.offset, stretch.problem, last + 1, entries[0][0] - 1))
            stretch = None
        if entries:
            last = entries[-1][0] + entries[-1][1] - 1
            walk.intact.append(IntactBlock(offset, offset + length, entries[0][0], last,
                                           sum(count for _, count, _ in entries)))
            walk.min_ts = min(times) if walk.min_ts is None else min(walk.min_ts, *times)
            walk.max_ts = max(times) if walk.max_ts is None else max(walk.max_ts, *times)
        offset += length
    if stretch is not None:
        walk.damaged.append(DamagedBlock(str(path), stretch.offset, stretch.problem, last + 1, None))
    return walk


def _timestamps(batch: memoryview, first: int, count: int, path: Path, offset: int) -> list[int]:
    try:
        return decode_index_columns(batch, first, count, f"{path} entry {first}")[0][_TIMESTAMP]
    except ProvenanceFormatError as err:
        raise DamagedBlockError(path, offset, f"holds a damaged batch ({err})") from None


def _next_block(data: mmap.mmap, start: int) -> int | None:
    """The offset of the first block at or after ``start`` whose frame fits in the file and whose
    checksum holds: every block's compressed bytes begin with a zstd frame's magic number, 32
    bytes after the block's start, so only those places are tried (a false match is a 1 in 2^32
    checksum accident)."""
    position = start + BLOCK_HEADER_SIZE
    while (found := data.find(ZSTD_FRAME_MAGIC, position)) != -1:
        offset = found - BLOCK_HEADER_SIZE
        clen = int.from_bytes(data[offset:offset + 4], "little")
        crc = int.from_bytes(data[offset + 4:offset + 8], "little")
        if found + clen <= len(data) and zlib.crc32(data[found:found + clen]) == crc:
            return offset
        position = found + 1
    return None
