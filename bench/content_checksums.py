"""Scenario 15: what content checksums cost (issue 50).

The content repository writes contents into claim files and reads them back, with the
``content_checksums`` setting on (a CRC-32 of every 4 KiB block, kept in each claim file's trailer
and verified on every read: docs/formats/content-repository.md, "Checksums") and off, in turns on
the same disk, for three content sizes. The figure is write+read throughput, MB/s: writing every
content (``write_many``, then ``flush`` and ``close``: the claim files complete, page cache only),
then reading all of them back (``read_many``); the baseline is the same with checksums off. The
ratio is what a flow moving contents of that size pays at most for the setting (a flow does more
per content than write and read it once).
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from pathlib import Path

from bench import row
from repositories.content import FileSystemContentRepository

S15 = "15 content checksums"
ROUNDS = 5
#: (label, content size in bytes, contents in a full run)
SIZES = (("1 KiB", 1024, 200_000), ("64 KiB", 64 * 1024, 8_000), ("4 MiB", 4 * 1024**2, 120))


def write_and_read(folder: Path, contents: list[bytes], checksums: bool) -> float:
    """Seconds to write ``contents`` into a new repository at ``folder`` and read them back."""
    repo = FileSystemContentRepository(folder, checksums=checksums)
    began = time.perf_counter()
    writer = repo.writer()
    claims = writer.write_many(contents)
    writer.flush()
    writer.close()
    read = repo.read_many(claims)
    took = time.perf_counter() - began
    assert sum(map(len, read)) == sum(map(len, contents))
    shutil.rmtree(folder)
    return took


def run(quick: bool, workdir: Path, size: int | None = None) -> list[dict]:
    """``size``: how many contents of each size (default: SIZES' counts, a tenth with quick)."""
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for label, nbytes, count in SIZES:
        count = size or (max(10, count // 10) if quick else count)
        block = os.urandom(nbytes)
        contents = [block] * count
        megabytes = nbytes * count / 1e6
        timings: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(ROUNDS):
            for checksums in (False, True):  # in turns: this shared disk's speed wanders
                timings[checksums].append(write_and_read(workdir / "content", contents, checksums))
        with_sums = megabytes / statistics.median(timings[True])
        without = megabytes / statistics.median(timings[False])
        rows.append(row(S15, f"write+read {count:,} contents of {label}", round(with_sums, 1), round(without, 1),
                        "the same, checksums off", "MB/s",
                        f"medians of {ROUNDS} rounds in turns; {megabytes:,.0f} MB a round"))
    return rows
