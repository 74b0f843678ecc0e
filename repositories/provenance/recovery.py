"""Opening a durable provenance repository: what an earlier run left, made whole again.

``RepositoryRecovery.run`` (docs/formats/provenance-repository.md lists every crash point):

1. takes in the committed event files (a ``.prov`` with its ``.toc``; a lost or damaged table of
   contents is rebuilt from the event file), checks each for damage (``damage.check_structure``:
   one problem line a damaged file) and notes partial ones (``.part``);
2. opens the journals, cutting a torn tail, deleting the empty ones and those whose events are in a
   committed event file already (merged before a crash);
3. continues the ids one past the largest id found anywhere (or the kept high-water mark);
4. merges the other journals again, all into one event file (partial files and their index entries
   removed first), counting the ids missing between their records;
5. indexes committed event files the index lacks (e.g. the index was deleted).

Read-only (``readonly``): nothing is created, cut, merged, deleted or written; the journals a
writable open would merge are kept as sealed generations and searched where they lie, a torn tail
is stepped over, and event files missing from the index are an error (reading cannot rebuild it).

What was found goes to ``report`` (the repository's ``recovery``): ``journals_merged``,
``events_recovered``, ``journals_deleted``, ``torn_bytes_cut``, ``tocs_rebuilt``, ``problems``,
``events_lost``, ``damaged_event_files`` (their lines of ``problems``), ``damaged_blocks``, and when
there were any ``ids_without_events``, ``files_reindexed``, ``partial_files_removed``,
``partial_index_entries_removed``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

from repositories.fsutil import write_atomically
from repositories.provenance.event import ProvenanceFormatError
from repositories.provenance.damage import DamagedBlock, check_structure, describe_file, rebuild_toc, repair_advice
from repositories.provenance.eventfile import EVENT_SUFFIX, PART_SUFFIX, DamagedBlockError, TableOfContents, toc_file_name
from repositories.provenance.file_set import EventFileSet, StoredEventFile
from repositories.provenance.index import ProvenanceIndex
from repositories.provenance.journal import JournalFile, JournalRecord, parse_journal_name
from repositories.provenance.merge import JournalMerger, read_next_id
from repositories.provenance.unmerged import Generation, UnmergedJournals

log = logging.getLogger(__name__)

#: a generation's records sorted by first id: ``(first id, id of the journal, journal, record)``
SortedRecords = list[tuple[int, int, JournalFile, JournalRecord]]


class RepositoryRecovery:
    """One recovery of a repository's files into its parts (see the module docstring)."""

    def __init__(self, root: Path, containers: Sequence[Path], *, readonly: bool, files: EventFileSet,
                 journals: UnmergedJournals, index: ProvenanceIndex, merger: JournalMerger,
                 report: dict[str, Any]):
        self.root = root
        self.containers = list(containers)
        self.readonly = readonly
        self.files = files
        self.journals = journals
        self.index = index
        self.merger = merger
        self.report = report

    def run(self) -> None:
        self.report.update(journals_merged=0, events_recovered=0, journals_deleted=0, torn_bytes_cut=0,
                           tocs_rebuilt=[], problems=[], events_lost=0, damaged_event_files=[], damaged_blocks=0)
        partial_found = self._take_in_event_files()
        leftovers, damaged, max_id = self._open_journals()
        max_id = max([max_id, self.index.max_indexed_id()] + [f.toc.last_id for f in self.files.in_order()])
        next_id = max(max_id + 1, read_next_id(self.root))
        self.journals.resume(next_id)
        if leftovers:
            self._merge_leftovers(leftovers, damaged)
        elif partial_found and not self.readonly:
            self.merger.discard_partial([], -1)
        self._index_unindexed()

    def _take_in_event_files(self) -> bool:
        """Step 1: the committed event files into the file set, each checked for damage
        (``check_structure``); whether partial ones were seen."""
        partial_found = False
        for container in self.containers:
            if not container.is_dir():   # read-only: a container never written
                continue
            for path in sorted(container.iterdir()):
                name = path.name
                if name.endswith(PART_SUFFIX):
                    partial_found = True
                    continue
                if not name.endswith(EVENT_SUFFIX) or not name[: -len(EVENT_SUFFIX)].isdigit():
                    continue
                file_id = int(name[: -len(EVENT_SUFFIX)])
                toc_path = container / toc_file_name(file_id)
                try:
                    toc = TableOfContents.read(toc_path)
                except (FileNotFoundError, ProvenanceFormatError) as err:
                    found = self._rebuilt_toc(path, file_id, toc_path, err)
                    if found is None:
                        continue
                    toc, damaged = found
                else:
                    damaged = _structure_damage(path, toc)
                self.files.add(StoredEventFile(file_id, path, toc_path, toc))
                self._report_damage(path, damaged)
        return partial_found

    def _rebuilt_toc(self, path: Path, file_id: int, toc_path: Path,
                     err: Exception) -> tuple[TableOfContents, list[DamagedBlock]] | None:
        """A lost or damaged table of contents rebuilt from the event file (written, unless
        read-only or the file is damaged: then ``repair`` writes it once it dropped the damage);
        None for a file no block of which reads: not taken in, reported (``repair`` deletes it)."""
        if not self.readonly:   # read-only: rebuilt in memory at every open, nothing to warn about
            log.warning("provenance: rebuilding the table of contents of %s (%s)", path, err)
        try:
            toc, damaged = rebuild_toc(path, file_id)
        except DamagedBlockError as unreadable:
            self._report_damage(path, [DamagedBlock(str(path), 0, f"{unreadable.problem}, and its table of "
                                                                 f"contents is lost", file_id, None)])
            return None
        if not self.readonly and not damaged:   # read-only: rebuilt in memory for this reader
            write_atomically(toc_path, toc.encode())
        self.report["tocs_rebuilt"].append(str(path))
        return toc, damaged

    def _report_damage(self, path: Path, damaged: list[DamagedBlock]) -> None:
        """Damaged blocks found at open: noted for the reads, and one problem line for the file,
        which the caller says once (a run prints its problems, the commands ``damage_warning``)."""
        if not damaged:
            return
        for block in damaged:
            self.files.damage.add(block)
        problem = f"{describe_file(str(path), damaged)}; its events there cannot be read, the rest can; " \
                  f"{repair_advice(self.root)}"
        self.report["problems"].append(problem)
        self.report["damaged_event_files"].append(problem)
        self.report["damaged_blocks"] += len(damaged)

    def _open_journals(self) -> tuple[dict[int, Generation], set[int], int]:
        """Step 2: the journals left to merge, by generation; the generations with a damaged
        journal; the largest id they hold."""
        leftovers: dict[int, Generation] = {}
        damaged: set[int] = set()   # generations with a journal that lost records
        max_id = -1
        for container in self.containers:
            journals = container / "journals"
            for path in sorted(journals.iterdir()) if journals.is_dir() else ():
                parsed = parse_journal_name(path.name)
                if parsed is None:
                    continue
                journal, lost_records = self._open_journal(path)
                if journal is None:
                    continue
                generation = leftovers.setdefault(journal.generation, Generation(journal.generation))
                generation.journals[parsed[1]] = journal
                max_id = max(max_id, *(r.last_id for r in journal.records))
                if lost_records:
                    damaged.add(journal.generation)
        return leftovers, damaged, max_id

    def _open_journal(self, path: Path) -> tuple[JournalFile | None, bool]:
        """A journal to merge again, its torn tail cut (stepped over when read-only), and whether
        it was damaged; None for one holding nothing or merged before a crash (deleted, unless
        read-only)."""
        journal, scan = JournalFile.open_existing(path, readonly=self.readonly)
        if scan.problem:
            self.report["torn_bytes_cut"] += 0 if self.readonly else scan.torn_bytes
            cut = "stepped over (read-only)" if self.readonly else "cut"
            problem = f"{path}: {scan.problem}; {scan.torn_bytes} bytes {cut} at the end"
            self.report["problems"].append(problem)
            log.warning("provenance: damaged journal: %s", problem)
        first = min(r.first_id for r in journal.records) if journal is not None else -1
        if journal is None or self.files.holding(first) is not None:  # empty, or merged before a crash
            if journal is not None:
                journal.close()
            if not self.readonly:
                path.unlink(missing_ok=True)
                self.report["journals_deleted"] += 1
            return None, False
        return journal, bool(scan.problem)

    def _merge_leftovers(self, leftovers: dict[int, Generation], damaged: set[int]) -> None:
        """Step 4: the leftover generations, their records in id order, merged into one event file
        (read-only: kept as sealed generations, searched where they lie)."""
        generations = []
        for first in sorted(leftovers):
            generation = leftovers[first]
            records = sorted((r.first_id, id(j), j, r) for j in generation.journals.values() for r in j.records)
            for _, _, journal, record in records:
                generation.add_record(journal, record)
            generations.append(generation)
            self._count_lost(generation, records, first in damaged)
        self.journals.sealed = generations   # to be merged (read-only: searched where they lie)
        if self.readonly:   # searched where they lie, as a running repository's unmerged journals
            self.report["events_recovered"] = sum(g.count for g in generations)
        else:
            result = self.merger.merge(generations, redo=True)
            self.report["journals_merged"] = sum(len(g.journals) for g in generations)
            self.report["events_recovered"] = result["events"]

    def _count_lost(self, generation: Generation, records: SortedRecords, damaged: bool) -> None:
        """Ids missing between the readable records of a generation's journals. With a damaged
        journal among them they are events it lost: warned, and counted in ``events_lost`` (the
        ids after the last readable record cannot be counted). Otherwise they are ids a flow
        reserved whose events never arrived (a process died between the write-ahead log and
        provenance, or the ids were given up): ``ids_without_events``."""
        report = self.report
        expected, lost = generation.first_id, []
        for first, _, _journal, record in records:
            if first > expected:
                lost.append((expected, first - 1))
            expected = max(expected, record.last_id + 1)
        count = sum(b - a + 1 for a, b in lost)
        if count and not damaged:
            report["ids_without_events"] = report.get("ids_without_events", 0) + count
        elif count:
            ranges = ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in lost[:10])
            message = (f"{count} provenance events of journals {generation.first_id}-* could not be read "
                       f"(ids {ranges}{', ...' if len(lost) > 10 else ''}); the events after them were kept")
            report["events_lost"] += count
            report["problems"].append(message)
            log.warning("provenance: %s", message)

    def _index_unindexed(self) -> None:
        """Step 5: index the committed event files the index lacks, drop the shards of no file,
        and keep the id high-water mark (read-only: refuse to read with files missing)."""
        shards = self.index.shards
        indexed = set().union(*(s.files for s in shards)) if shards else set()
        unindexed = sorted(set(self.files) - indexed)
        if self.readonly:
            if unindexed:
                raise ProvenanceFormatError(
                    f"{self.root}: event files {', '.join(map(str, unindexed[:10]))} are not in the index (it was "
                    f"deleted or damaged), so a search would miss their events; reading without writing cannot "
                    f"rebuild it: run 'flowactors provenance repair' with write access, or start the flow")
            return
        for file_id in unindexed:
            try:
                self.merger.reindex(self.files[file_id])
            except DamagedBlockError as err:   # its header: indexed once repair rewrote it
                self.files.damage.note(err, self.files[file_id].toc)
                continue
            self.report.setdefault("files_reindexed", []).append(file_id)
        self.index.drop_unreferenced(self.files)
        self.merger.write_next_id(self.journals.next_id)


def _structure_damage(path: Path, toc: TableOfContents) -> list[DamagedBlock]:
    """``check_structure``, but nothing for a file of a version this release does not read (its
    reads refuse it, naming it)."""
    try:
        return check_structure(path, toc)
    except ProvenanceFormatError:
        return []
