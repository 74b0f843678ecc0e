"""Reading what LMDB lets be read of a damaged environment (the salvage's reader, salvage.py).

LMDB trusts its pages: a damaged one makes a read fail with ``MDB_CORRUPTED`` or
``MDB_PAGE_NOTFOUND``, and some damage (a garbled page header) trips one of its assertions,
which aborts the process. So the environment is read by a child process (this file run as a
script: it imports nothing but the standard library and py-lmdb), which the parent,
``DamagedEnvironment``, asks over a pipe to walk a sub-database from a key or to probe where a
key would be; a child that dies takes only the request it was serving with it, and the next
request starts another.

``DamagedEnvironment.walk`` yields every key and value that can be read, in key order. Where a
walk fails it goes on right after the last key it got; where it fails again before reading
anything, the damaged range is skipped: it looks for the smallest key (of the sub-database's key
width) from which LMDB can read again (doubling steps, then halving: a damaged page refuses
every key that would be looked for in it, so the keys that cannot be positioned on form one
range), says what it skipped in ``problems``, and goes on from there. The records read are
raw: the caller checks each against its own checksum.

Protocol (``_serve``): a request is one byte (``W`` walk from a key, ``F`` walk from the first
key, ``P`` probe a key, ``G`` get a key's value), the sub-database name (u16 BE length, bytes) and the key (u32 BE length,
bytes). Answers: ``R`` key and value (u32 BE lengths, then both), ``K`` the key a probe found
(u32 BE length, key), ``E`` the end of the sub-database (after a walk), no key at or after the
probe, or no such key (a get), ``X`` LMDB's error (u32 BE length, UTF-8 text). A walk answers
``R``... then ``E`` or ``X``; a get ``R``, ``E`` or ``X``.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TypeAlias

import lmdb

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_TWO = struct.Struct(">II")
#: records a child writes before it flushes its pipe
_FLUSH_EVERY = 256
#: what a failed request answers: (kind, detail)
Answer = tuple[str, bytes]
#: a sub-database handle
Db: TypeAlias = "lmdb._Database"


# --- the child ---------------------------------------------------------------------------------

def _read_exactly(stream: IO[bytes], count: int) -> bytes:
    data = stream.read(count)
    if len(data) != count:
        raise EOFError
    return data


def _serve(directory: str) -> None:
    """Answer requests on stdin about the environment in ``directory`` until stdin ends."""
    requests, out = sys.stdin.buffer, sys.stdout.buffer
    try:
        env: lmdb.Environment | None = lmdb.open(directory, readonly=True, lock=False, subdir=True, max_dbs=64,
                                                 create=False)
        opened = ""
    except lmdb.Error as e:
        env, opened = None, f"opening: {e}"
    handles: dict[bytes, Db] = {}
    while True:
        try:
            op = _read_exactly(requests, 1)
            name = _read_exactly(requests, _U16.unpack(_read_exactly(requests, 2))[0])
            key = _read_exactly(requests, _U32.unpack(_read_exactly(requests, 4))[0])
        except EOFError:
            return
        try:
            if env is None:
                raise lmdb.Error(opened)
            if name not in handles:
                handles[name] = env.open_db(name, create=False)
            _answer(env, handles[name], op, key, out)
        except lmdb.Error as e:
            text = f"{type(e).__name__}: {e}".encode()
            out.write(b"X" + _U32.pack(len(text)) + text)
        out.flush()


def _answer(env: lmdb.Environment, db: Db, op: bytes, key: bytes, out: IO[bytes]) -> None:
    with env.begin(db=db) as txn:
        cursor = txn.cursor()
        if op == b"G":
            value = cursor.get(key)
            out.write(b"E" if value is None else b"R" + _TWO.pack(len(key), len(value)) + key + value)
            return
        found = cursor.first() if op == b"F" else cursor.set_range(key)
        if op == b"P":
            out.write(b"K" + _U32.pack(len(cursor.key())) + cursor.key() if found else b"E")
            return
        count = 0
        while found:
            k, v = cursor.key(), cursor.value()
            out.write(b"R" + _TWO.pack(len(k), len(v)) + k + v)
            count += 1
            if count % _FLUSH_EVERY == 0:
                out.flush()
            found = cursor.next()
        out.write(b"E")


# --- the parent --------------------------------------------------------------------------------

class DamagedEnvironment:
    """The readable keys and values of the LMDB environment in ``directory``, which is never
    changed (opened read-only, without its lock file: nothing may write it meanwhile).
    ``problems`` lists, in words, what could not be read. A context manager (``close``)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = str(directory)
        self.problems: list[str] = []
        self._child: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "DamagedEnvironment":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the reading process (it ends with its stdin)."""
        child, self._child = self._child, None
        if child is not None:
            assert child.stdin is not None
            child.stdin.close()
            child.wait()

    def walk(self, name: bytes, width: int) -> Iterator[tuple[bytes, bytes]]:
        """Every key and value of sub-database ``name`` that can be read, in key order, skipping
        the damaged ranges (said in ``problems``); ``width``: the length of its keys (the usual
        length, where they vary), the unit in which a damaged range is skipped."""
        position: bytes | None = None   # where the next walk starts (None: at the first key)
        floor: bytes | None = None      # the keys wanted are after this one (None: all)
        last: bytes | None = None       # the last key read
        while True:
            got = None
            outcome: Answer = ("E", b"")
            for kind, key, value in self._request(b"F" if position is None else b"W", name, position or b""):
                if kind == "R":
                    got = last = key
                    yield key, value
                else:
                    outcome = (kind, key)
            if outcome[0] == "E":
                return
            if got is not None:   # read on right after the last key: the damage may be just there
                floor, position = got, got + b"\x00"
                continue
            after = floor or b""
            resume = self._skip(name, after, max(width, len(after)))
            where = "from the first key" if last is None else f"after key {last.hex()}"
            why = outcome[1].decode(errors="replace")
            if resume is None:
                self.problems.append(f"{name.decode()}: nothing could be read {where} on ({why})")
                return
            self.problems.append(f"{name.decode()}: the keys {where} up to key {resume.hex()} could not be "
                                 f"read ({why})")
            floor = position = resume

    def read(self, name: bytes, key: bytes) -> bytes | None:
        """The value of ``key`` in sub-database ``name``; None if absent or unreadable."""
        for kind, _key, value in self._request(b"G", name, key):
            if kind == "R":
                return value
        return None

    def _skip(self, name: bytes, after: bytes, width: int) -> bytes | None:
        """The first key readable past ``after``, looked for among keys of ``width`` bytes: doubling
        steps until a probe succeeds, then halving back to the smallest that does. None when
        nothing can be positioned on up to the largest key."""
        lo = int.from_bytes(after[:width].ljust(width, b"\x00"), "big")
        top = (1 << (8 * width)) - 1
        step, probe = 1, lo + 1
        while True:
            probe = min(probe, top)
            found = self._probe(name, probe, width)
            if found is not None:
                break
            if probe == top:
                return None
            lo, step = probe, step * 2
            probe = lo + step
        hi, key = probe, found
        while hi - lo > 1:
            mid = (lo + hi) // 2
            found = self._probe(name, mid, width)
            if found is None:
                lo = mid
            else:
                hi, key = mid, found
        return key or None

    def _probe(self, name: bytes, value: int, width: int) -> bytes | None:
        """The key LMDB positions on for the key ``value`` (``width`` bytes), ``b""`` when there is
        none at or after it, None when it cannot position there."""
        for kind, key, _ in self._request(b"P", name, value.to_bytes(width, "big")):
            if kind == "K":
                return key
            if kind == "E":
                return b""
        return None

    def _request(self, op: bytes, name: bytes, key: bytes) -> Iterator[tuple[str, bytes, bytes]]:
        """Send one request and yield its answers as ``(kind, key or text, value)``; a child that
        dies answers ``X`` with how it died (its standard error's last line)."""
        child = self._started()
        assert child.stdin is not None and child.stdout is not None
        answered = False
        try:
            child.stdin.write(op + _U16.pack(len(name)) + name + _U32.pack(len(key)) + key)
            child.stdin.flush()
            while True:
                kind = _read_exactly(child.stdout, 1)
                if kind == b"R":
                    klen, vlen = _TWO.unpack(_read_exactly(child.stdout, 8))
                    yield "R", _read_exactly(child.stdout, klen), _read_exactly(child.stdout, vlen)
                    continue
                answered = True
                if kind == b"E":
                    yield "E", b"", b""
                else:
                    yield kind.decode(), _read_exactly(child.stdout, _U32.unpack(_read_exactly(child.stdout, 4))[0]), b""
                return
        except (EOFError, BrokenPipeError):
            answered = True
            yield "X", self._died().encode(), b""
        finally:
            if not answered:   # left before the end of its answer: what is left of it goes with the child
                self._died()

    def _started(self) -> subprocess.Popen[bytes]:
        if self._child is None:
            self._child = subprocess.Popen([sys.executable, __file__, self.directory], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return self._child

    def _died(self) -> str:
        """How the reading process died (it is reaped); the next request starts another."""
        child, self._child = self._child, None
        assert child is not None and child.stderr is not None
        child.kill()
        child.wait()
        lines = child.stderr.read().decode(errors="replace").strip().splitlines()
        for stream in (child.stdin, child.stdout, child.stderr):
            if stream is not None:
                stream.close()
        return f"LMDB aborted reading it (exit status {child.returncode}: {lines[-1] if lines else 'no message'})"


if __name__ == "__main__":
    _serve(sys.argv[1])
