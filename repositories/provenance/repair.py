"""Repairing damaged event files: their damaged blocks dropped, the rest kept, the index matched.

``repair_event_files`` (``WriteAheadProvenanceRepository.repair_event_files``; ``flowactors
provenance repair``) reads every block of every event file (``verify_blocks``: checksum,
decompression, entry list) and takes the damage met at open too (a table of contents rebuilt
around a damaged stretch leaves it out). A damaged file is repaired in place, its intact blocks
where they are, so the index's block offsets stay right (docs/formats/provenance-repository.md,
"Repair"):

1. the index entries of the file's events that do not lie in an intact block are deleted
   (``ProvenanceIndex.drop_pointers``), so no search points into a dropped block;
2. a damaged header is rewritten (its magic, version and first id) from the file's name;
3. the table of contents is rewritten (atomically) listing the intact blocks only: the bytes of a
   dropped block in the middle stay, never read again (a *hole*);
4. what follows the last intact block (a block cut short, damaged blocks at the end) is cut off.

A crash between the steps leaves a file the next repair repairs again: each step is idempotent,
and until step 3 the old table of contents still lists the damaged blocks. A file none of whose
blocks reads is deleted (and so is one the open could not take in: no block read, and its table of
contents lost).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from repositories.fsutil import write_atomically
from repositories.provenance.damage import DamagedBlock, describe_blocks, describe_file, read_version, verify_blocks
from repositories.provenance.eventfile import FILE_HEADER_SIZE, TableOfContents, header_bytes, toc_file_name
from repositories.provenance.file_set import EventFileSet, StoredEventFile
from repositories.provenance.index import ProvenanceIndex

_LAST_ID = (1 << 63) - 1


@dataclass
class FileRepair:
    """What repairing one event file found and did."""

    path: str
    dropped: list[DamagedBlock] = field(default_factory=list)
    header: str | None = None        # what was wrong with its header, rewritten
    events_lost: int | None = 0      # None: unknown (a file whose table of contents is lost too)
    events_kept: int = 0
    bytes_cut: int = 0               # after the last intact block
    deleted: bool = False            # no block read: the file is gone

    def describe(self) -> str:
        """One line: the file, what was wrong, what was lost and kept."""
        if self.deleted:
            lost = "its events are lost" if self.events_lost is None else f"{self.events_lost} events lost"
            return f"{describe_file(self.path, self.dropped)}; no block of it reads: the file is deleted, {lost}"
        if self.dropped:
            found = f"{describe_blocks(self.dropped)}; {self.events_lost} events lost, {self.events_kept} kept; " \
                    f"the index no longer points into the dropped blocks"
        elif self.header is None:
            return f"{self.path}: {self.bytes_cut} bytes after its last block cut (nothing lost)"
        else:
            found = f"nothing lost, {self.events_kept} events kept"
        return f"{self.path}: " + (f"header: {self.header}, rewritten; " if self.header else "") + found


def repair_event_files(files: EventFileSet, index: ProvenanceIndex, *, fsync: bool) -> list[FileRepair]:
    """Verify every event file and repair the damaged ones (see the module docstring); what was
    found, one ``FileRepair`` a file that needed one. The caller holds the repository's merge lock."""
    repairs = []
    ordered = files.in_order()
    for position, info in enumerate(ordered):
        high = ordered[position + 1].file_id - 1 if position + 1 < len(ordered) else _LAST_ID
        repair = _repair_file(files, index, info, high, fsync)
        if repair is not None:
            repairs.append(repair)
    repairs += _delete_unreadable(files, index)
    if any(r.deleted for r in repairs):
        index.drop_unreferenced(files)
    return repairs


def _delete_unreadable(files: EventFileSet, index: ProvenanceIndex) -> list[FileRepair]:
    """Delete the event files the open could not take in (no block read, no table of contents),
    and the index entries into them (the open dropped a shard that listed no other file: how many
    events such a file held is unknown)."""
    taken_in = {str(info.path) for info in files.in_order()}
    repairs = []
    for block in files.damage.blocks():
        if block.path in taken_in or block.first_id is None:
            continue
        path = Path(block.path)
        path.unlink(missing_ok=True)
        path.with_name(toc_file_name(block.first_id)).unlink(missing_ok=True)
        later = [i for i in files if i > block.first_id]
        index.drop_pointers(block.first_id, block.first_id, later[0] - 1 if later else _LAST_ID, ())
        files.damage.forget(block.path)
        repairs.append(FileRepair(block.path, [block], events_lost=None, deleted=True))
    return repairs


def _repair_file(files: EventFileSet, index: ProvenanceIndex, info: StoredEventFile, high: int,
                 fsync: bool) -> FileRepair | None:
    """Repair one file whose events' ids are at most ``high``; None if it is intact."""
    path = str(info.path)
    fd = os.open(info.path, os.O_RDWR)
    try:
        version, header = read_version(fd, info.path, info.file_id)
        walk = verify_blocks(info.path, info.toc, version)
        dropped = {b.offset: b for b in walk.damaged}   # and as described when met first (at open):
        dropped.update((b.offset, b) for b in files.damage.blocks(path) if b.offset != 0)
        repair = FileRepair(path, [dropped[o] for o in sorted(dropped)], header.problem if header else None)
        end = walk.intact[-1].end if walk.intact else FILE_HEADER_SIZE
        repair.bytes_cut = max(os.fstat(fd).st_size - end, 0)
        if header is None and not dropped and not repair.bytes_cut:
            return None
        if not walk.intact:
            repair.deleted, repair.events_lost = True, info.toc.event_count
            files.delete(info.file_id)
            return repair
        repair.events_kept = sum(b.count for b in walk.intact)
        removed = index.drop_pointers(info.file_id, info.file_id, high, {b.offset for b in walk.intact})
        repair.events_lost = max(info.toc.event_count - repair.events_kept, removed)
        if header is not None:
            os.pwrite(fd, header_bytes(version, info.file_id), 0)
        toc = TableOfContents(info.file_id, walk.intact[-1].last_id, repair.events_kept, info.toc.min_timestamp,
                              info.toc.max_timestamp, tuple(b.first_id for b in walk.intact),
                              tuple(b.offset for b in walk.intact))
        write_atomically(info.toc_path, toc.encode(), fsync=fsync)
        if repair.bytes_cut:
            os.ftruncate(fd, end)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    files.replace(StoredEventFile(info.file_id, info.path, info.toc_path, toc))
    files.damage.forget(path)
    return repair
