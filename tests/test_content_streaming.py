"""A 2 GiB content streams through ``open_stream`` and ``open()`` with bounded memory.

The work runs in a fresh interpreter so that ``ru_maxrss`` (the process's peak RSS, which never
goes down) starts from a baseline no other test has raised: the growth measured is this copy's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

GIB = 1024**3
CHUNK = 1024 * 1024

CHILD = textwrap.dedent(
    """
    import json, os, resource, shutil, sys, time, zlib
    from repositories.content import FileSystemContentRepository

    root = sys.argv[1]
    total, chunk_size = int(sys.argv[2]), int(sys.argv[3])
    repo = FileSystemContentRepository(root)
    chunk = bytearray(os.urandom(chunk_size))
    baseline_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()

    # Write the content: each 1 MiB chunk starts with its index, so a lost or repeated chunk
    # changes the checksum.
    writer = repo.writer()
    crc = 0
    with writer.open_stream() as out:
        for index in range(total // chunk_size):
            chunk[:8] = index.to_bytes(8, "big")
            out.write(chunk)
            crc = zlib.crc32(chunk, crc)
    original = out.claim
    writer.flush(sync=False)
    writer.close()

    # Copy it: read one claim, write the other, 1 MiB at a time.
    copier = repo.writer()
    with repo.open(original) as source, copier.open_stream() as copy:
        while True:
            data = source.read(chunk_size)
            if not data:
                break
            copy.write(data)
    copied = copy.claim
    copier.close()

    # Read the copy back and check it.
    check = 0
    with repo.open(copied) as stream:
        for data in stream:
            check = zlib.crc32(data, check)
    elapsed = time.monotonic() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for resource_claim in {original.resource, copied.resource}:
        os.unlink(repo.path_of(resource_claim))
    print(json.dumps(dict(
        original_length=original.length, copied_length=copied.length,
        same_claim=original.resource == copied.resource, crc_ok=check == crc,
        rss_growth_bytes=(peak_kib - baseline_kib) * 1024, seconds=elapsed,
    )))
    """
)


def test_a_2_gib_content_streams_with_bounded_memory(tmp_path):
    root = tmp_path / "content"
    try:
        result = subprocess.run(
            [sys.executable, "-c", CHILD, str(root), str(2 * GIB), str(CHUNK)],
            capture_output=True, text=True, timeout=180,
        )
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(root, ignore_errors=True)  # pytest keeps tmp dirs: do not keep 4 GiB
    print(f"\n2 GiB stream + copy + check: {report['seconds']:.1f} s, "
          f"peak RSS growth {report['rss_growth_bytes'] / 2**20:.1f} MiB")
    assert report["original_length"] == report["copied_length"] == 2 * GIB
    assert not report["same_claim"]
    assert report["crc_ok"]
    assert report["rss_growth_bytes"] < 100 * 1024 * 1024
    assert report["seconds"] < 60
