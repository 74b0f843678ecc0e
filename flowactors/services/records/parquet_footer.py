"""A Parquet file's row groups as its footer places them, read here, not through pyarrow.

pyarrow's column chunk metadata (``RowGroupMetaData.column``) checks the chunk as it is made and
throws a C++ exception that nothing catches when the check fails (a footer whose level histograms
do not fit the schema: the process aborts, std::terminate); its reads of the same chunks raise
``OSError``. The ParquetReader's file range (``parquet.file.range.*``) needs only each row
group's place in the file, so that place is read from the footer's Thrift (compact protocol)
here: a footer that cannot be read is a ``ValueError``, never the end of the process. Only the
offsets and sizes are decoded, the rest skipped: about 20 ms for a footer of 1000 column chunks.
"""

from __future__ import annotations

from typing import Any, BinaryIO

#: the deepest nesting of structs and lists read (Thrift's own limit in parquet-cpp is 64)
MAX_DEPTH = 64
#: compact protocol types
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT, _UUID = range(1, 14)
#: bytes a value of a fixed width takes as a collection's element (a boolean is a byte there)
_WIDTH = {_TRUE: 1, _FALSE: 1, _BYTE: 1, _DOUBLE: 8, _UUID: 16}
#: field ids: FileMetaData.row_groups, RowGroup.columns, ColumnChunk.meta_data, and ColumnMetaData's
#: total_compressed_size, data_page_offset, dictionary_page_offset
_ROW_GROUPS, _COLUMNS, _META_DATA = 4, 1, 3
_COMPRESSED_SIZE, _DATA_PAGE, _DICTIONARY_PAGE = 7, 9, 11
#: what is read of the footer (field id -> what is read of its value; the other fields are skipped)
_WANTED = {_ROW_GROUPS: {_COLUMNS: {_META_DATA: {_COMPRESSED_SIZE: {}, _DATA_PAGE: {}, _DICTIONARY_PAGE: {}}}}}


def row_group_spans(stream: BinaryIO, size: int) -> list[tuple[int, int]]:
    """Each row group's (first byte, compressed size) in the Parquet file of ``size`` bytes that
    ``stream`` holds from its position 0: the first byte is its first column chunk's (dictionary
    page, else first data page), the size its column chunks' together. Raises ``ValueError``
    when the footer is not one (``OSError`` from the stream passes)."""
    stream.seek(size - 8)
    tail = stream.read(8)
    length = int.from_bytes(tail[:4], "little")
    if len(tail) != 8 or tail[4:] != b"PAR1" or length > size - 12:
        raise ValueError("the file does not end in a plain footer")
    stream.seek(size - 8 - length)
    data = stream.read(length)
    try:
        footer, end = _struct(data, 0, _WANTED, 0)
    except IndexError:
        end = len(data) + 1
    if end > len(data):
        raise ValueError("the footer ends inside a value")
    spans = []
    for group in _field(footer, _ROW_GROUPS, list, "row groups"):
        chunks = [_field(chunk, _META_DATA, dict, "column chunk metadata")
                  for chunk in _field(group, _COLUMNS, list, "column chunks")]
        first = min(_first_page(c) for c in chunks) if chunks else 0
        spans.append((first, sum(_field(c, _COMPRESSED_SIZE, int, "compressed size") for c in chunks)))
    return spans


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """The unsigned varint at ``at``, and the position after it."""
    result, shift = data[at], 0
    while data[at] & 0x80:   # seven bits more follow
        at, shift = at + 1, shift + 7
        if shift > 63:
            raise ValueError("the footer holds a varint longer than 10 bytes")
        result = (result & ((1 << shift) - 1)) | (data[at] << shift)
    return result, at + 1


def _struct(data: bytes, at: int, wanted: dict[int, Any], depth: int) -> tuple[dict[int, Any], int]:
    """The struct at ``at`` as {field id: value} of the fields ``wanted`` names (integers, or
    structs and lists of structs read as ``wanted[id]`` says), and the position after it."""
    if depth >= MAX_DEPTH:
        raise ValueError(f"the footer nests more than {MAX_DEPTH} levels")
    fields: dict[int, Any] = {}
    last = 0
    while True:
        header = data[at]
        at += 1
        if not header & 0x0F:   # a stop (Thrift reads a field of type 0 as one)
            return fields, at
        if header >> 4:
            last += header >> 4
        else:
            last, at = _varint(data, at)
            last = (last >> 1) ^ -(last & 1)
        kind = header & 0x0F
        inner = wanted.get(last)
        if inner is None:
            at = _skip(data, at, kind, depth)
        elif kind in (_I16, _I32, _I64):
            value, at = _varint(data, at)
            fields[last] = (value >> 1) ^ -(value & 1)
        elif kind == _STRUCT:
            fields[last], at = _struct(data, at, inner, depth + 1)
        elif kind == _LIST and data[at] & 0x0F == _STRUCT:
            count, _kinds, at = _collection(data, at, kind)
            elements = []
            for _ in range(count):   # a struct takes a byte at least: past the end, data[at] stops it
                element, at = _struct(data, at, inner, depth + 1)
                elements.append(element)
            fields[last] = elements
        else:
            raise ValueError(f"the footer's field {last} is of type {kind}, not the one Parquet gives it")


def _skip(data: bytes, at: int, kind: int, depth: int) -> int:
    """The position after the value of type ``kind`` at ``at`` (a struct's field)."""
    if kind in (_TRUE, _FALSE):
        return at
    if kind in (_I16, _I32, _I64):
        while data[at] & 0x80:
            at += 1
        return at + 1
    if kind == _BINARY:
        length, at = _varint(data, at)
        return at + length
    if kind in _WIDTH:
        return at + _WIDTH[kind]
    if kind == _STRUCT:
        return _struct(data, at, {}, depth + 1)[1]
    if depth >= MAX_DEPTH:
        raise ValueError(f"the footer nests more than {MAX_DEPTH} levels")
    count, kinds, at = _collection(data, at, kind)
    fixed = sum(_WIDTH.get(element, 0) for element in kinds)
    variable = [element for element in kinds if element not in _WIDTH]
    if not variable:   # elements of a fixed width: stepped over at once
        at += count * fixed
        if at > len(data):
            raise ValueError("the footer ends inside a value")
        return at
    for _ in range(count):   # such an element takes a byte at least: past the end, data[at] stops it
        at += fixed
        for element in variable:
            at = _skip(data, at, element, depth + 1)
    return at


def _collection(data: bytes, at: int, kind: int) -> tuple[int, tuple[int, ...], int]:
    """A list's, set's or map's header at ``at``: its count, its elements' types (a map's key and
    value), and the position after it."""
    if kind in (_LIST, _SET):
        header = data[at]
        count, at = (header >> 4, at + 1) if header >> 4 != 15 else _varint(data, at + 1)
        return count, (header & 0x0F,), at
    if kind == _MAP:
        count, at = _varint(data, at)
        return (count, (data[at] >> 4, data[at] & 0x0F), at + 1) if count else (0, (), at)
    raise ValueError(f"the footer holds a value of unknown type {kind}")


def _field(struct: Any, field: int, kind: type, what: str) -> Any:
    value = struct.get(field) if isinstance(struct, dict) else None
    if not isinstance(value, kind):
        raise ValueError(f"the footer has no {what} where one belongs")
    return value


def _first_page(chunk: dict[int, Any]) -> int:
    """Where a column chunk starts: its dictionary page, else its first data page."""
    if chunk.get(_DICTIONARY_PAGE):
        return _field(chunk, _DICTIONARY_PAGE, int, "dictionary page offset")
    return _field(chunk, _DATA_PAGE, int, "data page offset")
