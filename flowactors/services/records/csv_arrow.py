"""How the CSV reader (csv.py) has pyarrow parse a content: in windows parsed on pyarrow's
threads where a window can be cut at a record's end by a byte search, else by pyarrow's
streaming reader, paced. Both count the content's quote characters on the way.

**Windows.** The content is read ``WINDOW_BLOCKS`` blocks at a time. A window without the quote
character and without an escaped line end holds no line end that is not a record's end: it is cut
after its last line end, and the part is parsed by ``pyarrow.csv.read_csv``, whose threads parse
its blocks side by side (pyarrow's streaming reader parses one block after another). The last
window, to the content's end, is parsed so too, quotes or not: pyarrow finds its records. While
a window's batches are taken, the next is parsed on a thread of the reader's own: two windows at
most are held.

**Streaming.** From a window with a quote character on (a line end may be inside a quoted value,
which only pyarrow's parser tells), the rest is read by ``pyarrow.csv.open_csv`` from the
content's stream (``_Paced``), a block at a time.

**Quotes.** An odd count of quote characters (escaped ones not counted) at the content's end is a
quoted value left open (or a quote inside an unquoted value, refused there too): a
``MalformedRecordError`` before the last batch is given.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterator

import pyarrow as pa
import pyarrow.csv as pa_csv

from flowactors.sdk.records.api import MalformedRecordError

#: the blocks a window holds
WINDOW_BLOCKS = 4
#: the blocks pyarrow's streaming reader may read past the batches taken (it would read 32 ahead)
READ_AHEAD = 4
#: seconds a read waits, while a batch is asked for, before it is done anyway
STALL = 0.05


@dataclass(frozen=True)
class Parsing:
    """What pyarrow is told for one content: its options, the columns' (internal) names, the
    block size, the encoding, and the quote and escape characters as bytes (empty: none)."""

    parse: pa_csv.ParseOptions
    convert: pa_csv.ConvertOptions
    names: list[str]
    block: int
    encoding: str
    quote: bytes
    escape: bytes

    def plain(self) -> pa_csv.ParseOptions:
        """``parse`` for a window without quotes: no value holds a line end (pyarrow then parses
        a third faster)."""
        p = self.parse
        return pa_csv.ParseOptions(delimiter=p.delimiter, quote_char=p.quote_char, double_quote=p.double_quote,
                                   escape_char=p.escape_char, newlines_in_values=False,
                                   ignore_empty_lines=p.ignore_empty_lines)

    def read_options(self, header: bool) -> pa_csv.ReadOptions:
        return pa_csv.ReadOptions(block_size=self.block, encoding=self.encoding, column_names=self.names,
                                  skip_rows=1 if header else 0)


class Quotes:
    """A content's quote characters counted piece by piece, escaped ones not; whether a double
    quote was seen (a value may then be left in double quotes)."""

    def __init__(self, parsing: Parsing):
        self._quote = parsing.quote
        self._escape = parsing.escape if parsing.escape != parsing.quote else b""
        self._count = 0
        self._after_escape = False
        self.double_quoted = False

    def add(self, data: bytes) -> bytes:
        """Count the quotes of ``data``, the next piece of the content; return it."""
        self.double_quoted = self.double_quoted or b'"' in data
        if self._quote and self._quote in data:
            self._count += data.count(self._quote)
            if self._escape:
                self._count -= data.count(self._escape + self._quote)
                self._count -= self._after_escape and data.startswith(self._quote)
        self._after_escape = bool(self._escape) and data.endswith(self._escape)
        return data

    def look(self, data: bytes) -> None:
        """Note whether ``data``, a piece without the quote character, holds a double quote."""
        self.double_quoted = self.double_quoted or b'"' in data

    def unclosed(self) -> bool:
        return self._count % 2 == 1


class Reading:
    """One pass of pyarrow over a content from ``start`` (of its ``stream``): ``batches``. Where
    a pass that failed (a value pyarrow would not convert) can be taken up again: ``mark``."""

    def __init__(self, stream: BinaryIO, mark: tuple[int, bool, int], parsing: Parsing):
        self._stream, self._parsing = stream, parsing
        self._start, self._header, self.given = mark
        self.quotes = Quotes(parsing)
        #: (a record's start in the stream, whether a header line is there, the content's records
        #: before it): where the batch being parsed comes from (a window's start, or where the
        #: streaming reader began); a pass is made from the content's start, or from a mark
        self.mark = mark

    def batches(self, drop: int = 0) -> Iterator[pa.RecordBatch]:
        """The records, with the internal names; the first ``drop`` left out (a pass taken up
        again at a ``mark`` after the records given since: pyarrow's streaming reader reads them
        again, and they are dropped here, since it counts empty lines as rows to skip). ``given``
        counts the content's records given."""
        if drop:
            yield from self._counted(_dropped(self._streamed(self._start, self._header), drop))
            return
        pool = None
        try:
            ahead = None   # the window parsed while the one before it is given
            for position, header, last, piece in self._windows():
                if piece is None:   # from here, pyarrow's streaming reader
                    if ahead is not None:
                        yield from self._given(*ahead)
                    self.mark = (position, header, self.given)
                    yield from self._counted(self._streamed(position, header))
                    return
                if last and ahead is None:   # the content is one window: parsed here
                    yield from self._given(position, header, last, self._table(piece, header, last))
                    return
                pool = pool or ThreadPoolExecutor(1, thread_name_prefix="csv-window")
                parsed = pool.submit(self._table, piece, header, last)
                if ahead is not None:
                    yield from self._given(*ahead)
                ahead = (position, header, last, parsed)
            if ahead is not None:
                yield from self._given(*ahead)
        finally:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)

    def _windows(self) -> Iterator[tuple[int, bool, bool, Any]]:
        """Each window: (where it starts, whether a header line starts it, whether it is the last,
        its bytes to parse, or None when it must be streamed from there)."""
        p = self._parsing
        self._stream.seek(self._start)
        size = WINDOW_BLOCKS * p.block
        position, rest, header = self._start, b"", self._header
        while True:
            data = rest + _read(self._stream, size - len(rest))
            if len(data) < size:
                yield position, header, True, self.quotes.add(data)
                return
            cut = self._cut(data)
            if cut is None:
                yield position, header, False, None
                return
            self.quotes.look(data)
            yield position, header, False, pa.py_buffer(data).slice(0, cut)
            position, rest, header = position + cut, data[cut:], False

    def _given(self, position: int, header: bool, last: bool, parsed: Any) -> Iterator[pa.RecordBatch]:
        """A window's batches (``parsed``: its table, or the future of it); after the last, an
        odd count of quotes is an error, before its batches are given."""
        self.mark = (position, header, self.given)
        table = parsed.result() if isinstance(parsed, Future) else parsed
        if last and self.quotes.unclosed():
            raise MalformedRecordError(f"not valid CSV: a quoted value is not closed before the content ends "
                                       f"(record {self.given})", record=self.given)
        for batch in table.to_batches() if table is not None else ():
            if batch.num_rows:
                self.given += batch.num_rows
                yield batch

    def _cut(self, data: bytes) -> int | None:
        """Where the last whole record of a window ends (after its last line end), when a byte
        search tells; None when the window holds the quote character or an escaped line end."""
        p = self._parsing
        if p.quote and p.quote in data:
            return None
        if p.escape and p.escape in data and (p.escape + b"\n" in data or p.escape + b"\r" in data):
            return None   # (a byte search for one character is memchr's; for two, several times slower)
        end = data.rfind(b"\n")
        return end + 1 if end >= 0 else None

    def _table(self, data: bytes | pa.Buffer, header: bool, last: bool) -> pa.Table | None:
        """A window's records, its blocks parsed side by side on pyarrow's threads. The last
        window may hold the quote character and line ends inside values, or nothing but white
        space (no records: None); the others hold no quote character."""
        if last and not data.strip():
            return None
        return pa_csv.read_csv(pa.BufferReader(data), read_options=self._parsing.read_options(header),
                               parse_options=self._parsing.parse if last else self._parsing.plain(),
                               convert_options=self._parsing.convert)

    def _streamed(self, position: int, header: bool) -> Iterator[pa.RecordBatch]:
        """The records from ``position`` to the content's end, by pyarrow's streaming reader."""
        self._stream.seek(position)
        source = _Paced(self._stream, self.quotes)
        try:
            with source.asking():
                reader = pa_csv.open_csv(source, read_options=self._parsing.read_options(header),
                                         parse_options=self._parsing.parse, convert_options=self._parsing.convert)
            while True:
                with source.asking():
                    batch = next(reader, None)
                if batch is None:
                    return
                yield batch
        finally:
            source.finish()

    def _counted(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``batches`` streamed to the content's end (empty ones left out), each given once the
        next is parsed; after the last, an odd count of quotes is an error (that batch is then
        not given)."""
        held = None
        for batch in batches:
            if batch.num_rows:
                if held is not None:
                    self.given += held.num_rows
                    yield held
                held = batch
        if self.quotes.unclosed():
            raise MalformedRecordError(f"not valid CSV: a quoted value is not closed before the content ends "
                                       f"(record {self.given})", record=self.given)
        if held is not None:
            self.given += held.num_rows
            yield held


def _dropped(batches: Iterator[pa.RecordBatch], count: int) -> Iterator[pa.RecordBatch]:
    """``batches`` without their first ``count`` records."""
    for batch in batches:
        if count >= batch.num_rows:
            count -= batch.num_rows
            continue
        yield batch.slice(count)
        count = 0


def _read(stream: BinaryIO, size: int) -> bytes:
    """``size`` bytes of ``stream``, fewer only at its end."""
    data = stream.read(size)
    while 0 < len(data) < size:
        more = stream.read(size - len(data))
        if not more:
            break
        data += more
    return data


class _Paced:
    """A content as pyarrow's streaming reader reads it, on its I/O thread, paced: pyarrow reads
    32 blocks ahead of the batches it gives; here a read waits while ``READ_AHEAD`` blocks are
    read past the batches taken (``asking``), so a reader holds a few blocks, whatever the
    content's size. A read that waited ``STALL`` seconds while a batch is asked for is done
    anyway, and so every read till that batch comes: it needs them (records skipped, or a record
    longer than the blocks ahead). Its quotes are counted (``Quotes``)."""

    closed = False

    def __init__(self, stream: BinaryIO, quotes: Quotes):
        self._stream = stream
        self._quotes = quotes
        self._pace = threading.Condition()
        self._reads = self._taken = 0
        self._asking = True
        self._unpaced = False   # till the batch asked for comes
        self._done = False

    def read(self, size: int = -1) -> bytes:
        with self._pace:
            while not (self._done or self._unpaced or self._reads <= self._taken + READ_AHEAD):
                if not self._pace.wait(STALL if self._asking else None) and self._asking:
                    self._unpaced = True   # the batch asked for needs more: records skipped, or a long one
            if self._done:
                return b""
            self._reads += 1
            data = self._stream.read(size)
        return self._quotes.add(data)

    @contextmanager
    def asking(self) -> Iterator[None]:
        """While pyarrow is asked for a batch (or opened); one more batch is taken after."""
        self._set(asking=True)
        try:
            yield
        finally:
            self._set(asking=False, unpaced=False, taken=self._taken + 1)

    def finish(self) -> None:
        """No more batches are taken: a read waiting returns at once, as at the content's end."""
        self._set(done=True)

    def _set(self, **state: Any) -> None:
        with self._pace:
            for name, value in state.items():
                setattr(self, f"_{name}", value)
            self._pace.notify_all()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        pass
