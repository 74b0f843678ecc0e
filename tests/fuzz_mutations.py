"""What the format fuzzers share: damaged inputs as Hypothesis strategies, and the guards that
turn a hang or an unbounded allocation into a finding (tests/test_fuzz_formats.py, bench/fuzz.py).

A damaged input is a valid one (made by the format's real writer) changed by a few mutations
(bytes flipped or set, cut short, bytes inserted, deleted, repeated or spliced from another valid
input, a length field set to a boundary value), and then, half the time, *resealed*: its
checksums recomputed by a format's own ``reseal`` so the reader gets past them to what they
guard. JSON formats are mutated as JSON too: a value anywhere in the document replaced by
another, a key removed or added. Arbitrary bytes are drawn besides.
"""

from __future__ import annotations

import contextlib
import resource
import signal
import struct
import zlib
from typing import Any, Callable, Iterator, Sequence

import orjson
from hypothesis import strategies as st

#: the most bytes of an arbitrary input (a damaged one is as long as its seed, give or take)
MAX_ARBITRARY = 512
#: CPU seconds one example may take before it counts as a hang
EXAMPLE_CPU_SECONDS = 10.0
#: bytes an example may allocate beyond what the process held before it (``memory_bound``)
EXAMPLE_MEMORY = 1 << 30

#: values a length or count field is set to: the edges where readers go wrong
_BOUNDARIES = (0, 1, 2, 3, 4, 7, 8, 15, 16, 127, 128, 255, 256, 0x7FFF, 0x8000, 0xFFFE, 0xFFFF, 0x10000,
               0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF, 1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1)
_WIDTHS = {1: "B", 2: "H", 4: "I", 8: "Q"}

Reseal = Callable[[bytes], bytes]


class Hang(Exception):
    """An example ran past ``EXAMPLE_CPU_SECONDS`` of CPU time."""


@contextlib.contextmanager
def cpu_limit(seconds: float = EXAMPLE_CPU_SECONDS) -> Iterator[None]:
    """Raise ``Hang`` in the body once it has used ``seconds`` of CPU time (SIGPROF: the
    wall-clock SIGALRM is pytest-timeout's)."""
    def hang(_signum: int, _frame: Any) -> None:
        raise Hang(f"the reader ran for more than {seconds} s of CPU time")

    previous = signal.signal(signal.SIGPROF, hang)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _data_bytes() -> int:
    """This process's private writable memory (what RLIMIT_DATA counts), from /proc."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmData in /proc/self/status")


@contextlib.contextmanager
def memory_bound(extra: int = EXAMPLE_MEMORY) -> Iterator[None]:
    """Make an allocation of more than ``extra`` bytes beyond what the process holds now fail
    with ``MemoryError`` (RLIMIT_DATA: private memory only, so LMDB's read-only maps of a file
    do not count). A reader that trusts a length field to allocate fails here instead of
    passing unseen on a machine that overcommits."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    bound = _data_bytes() + extra
    if hard != resource.RLIM_INFINITY:
        bound = min(bound, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (bound, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


# --- byte mutations ------------------------------------------------------------------------------


@st.composite
def _mutation(draw: st.DrawFn, data: bytearray, seeds: Sequence[bytes]) -> None:
    """Apply one mutation to ``data`` in place."""
    size = len(data)
    kind = draw(st.sampled_from(("flip", "set", "truncate", "insert", "delete", "repeat", "splice", "length")))
    at = draw(st.integers(0, max(size - 1, 0)))
    if kind == "flip" and size:
        data[at] ^= 1 << draw(st.integers(0, 7))
    elif kind == "set" and size:
        data[at] = draw(st.sampled_from((0, 1, 0x7F, 0x80, 0xFF)) | st.integers(0, 255))
    elif kind == "truncate":
        del data[at:]
    elif kind == "insert":
        data[at:at] = draw(st.binary(min_size=1, max_size=16))
    elif kind == "delete":
        del data[at:at + draw(st.integers(1, 32))]
    elif kind == "repeat":
        data[at:at] = data[at:at + draw(st.integers(1, 64))]
    elif kind == "splice":
        other = draw(st.sampled_from(seeds))
        start = draw(st.integers(0, max(len(other) - 1, 0)))
        piece = other[start:start + draw(st.integers(1, 256))]
        if draw(st.booleans()):
            data[at:at + len(piece)] = piece
        else:
            data[at:at] = piece
    elif kind == "length" and size:
        width = draw(st.sampled_from(sorted(_WIDTHS)))
        value = draw(st.sampled_from(_BOUNDARIES) | st.integers(0, max(size * 2, 1)))
        order = draw(st.sampled_from("<>"))
        packed = struct.pack(order + _WIDTHS[width], value % (1 << (8 * width)))
        data[at:at + width] = packed


@st.composite
def mutated(draw: st.DrawFn, seeds: Sequence[bytes], reseal: Reseal | None = None, most: int = 4) -> bytes:
    """One of ``seeds`` changed by 1 to ``most`` mutations, then resealed (half the time) when the
    format has checksums ``reseal`` can recompute."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, most))):
        draw(_mutation(data, seeds))
    out = bytes(data)
    if reseal is not None and draw(st.booleans()):
        out = reseal(out)
    return out


def damaged(seeds: Sequence[bytes], reseal: Reseal | None = None) -> st.SearchStrategy[bytes]:
    """Valid inputs mutated (``mutated``), the seeds themselves, and arbitrary bytes."""
    return st.one_of(mutated(seeds, reseal), st.sampled_from(seeds), st.binary(max_size=MAX_ARBITRARY))


# --- checksums ------------------------------------------------------------------------------------


def tail_crc(data: bytes) -> bytes:
    """``data`` with its last 4 bytes replaced by the CRC-32 (LE) of the bytes before them: the
    framing of FlowFile records, journal and outbox entries and tables of contents."""
    if len(data) < 4:
        return data
    body = data[:-4]
    return body + struct.pack("<I", zlib.crc32(body))


# --- JSON mutations -------------------------------------------------------------------------------

#: any JSON value (orjson's limits: integers within 64 bits)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 64) - 1) | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def _paths(value: Any, path: tuple = ()) -> Iterator[tuple]:
    """Every path (keys and indexes) to a value inside ``value``, itself first."""
    yield path
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _paths(inner, (*path, index))


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    return [*value[:head], _replace(value[head], rest, new), *value[head + 1:]]


@st.composite
def json_mutated(draw: st.DrawFn, documents: Sequence[Any], most: int = 3) -> Any:
    """One of ``documents`` (parsed JSON) with 1 to ``most`` changes: a value replaced by any JSON
    value (or a like one: a number by a number, a string by a string), an object's key removed,
    a key added."""
    document = draw(st.sampled_from(documents))
    for _ in range(draw(st.integers(1, most))):
        paths = list(_paths(document))
        path = draw(st.sampled_from(paths))
        target = _get(document, path)
        kind = draw(st.sampled_from(("replace", "remove", "add")))
        if kind == "remove" and isinstance(target, dict) and target:
            key = draw(st.sampled_from(sorted(target, key=str)))
            document = _replace(document, path, {k: v for k, v in target.items() if k != key})
        elif kind == "add" and isinstance(target, dict):
            document = _replace(document, path, {**target, draw(st.text(max_size=10)): draw(json_values)})
        else:
            document = _replace(document, path, draw(_like(target) | json_values))
    return document


def _get(value: Any, path: tuple) -> Any:
    for step in path:
        value = value[step]
    return value


def _like(value: Any) -> st.SearchStrategy[Any]:
    """Values of the same JSON kind as ``value``, at its edges."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.sampled_from((-1, 0, 1, -(1 << 63), (1 << 63) - 1, (1 << 64) - 1)) | st.integers(-(1 << 63),
                                                                                                   (1 << 63) - 1)
    if isinstance(value, float):
        return st.floats(allow_nan=False)
    if isinstance(value, str):
        return st.text(max_size=30) | st.sampled_from(("", "\x00", "/", "..", "a" * 600))
    return json_values


def json_documents(documents: Sequence[Any], raw_seeds: Sequence[bytes]) -> st.SearchStrategy[bytes]:
    """JSON text: ``documents`` mutated as JSON, their text mutated as bytes, or arbitrary bytes."""
    return st.one_of(json_mutated(documents).map(orjson.dumps), damaged(raw_seeds))
