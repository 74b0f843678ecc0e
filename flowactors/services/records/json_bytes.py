"""A bytes field read from JSON as NiFi's JsonTreeReader reads it (docs/records/json.md).

NiFi holds a bytes field as ARRAY[BYTE] and its JSON reader takes an array of numbers for it,
each one made a Java byte; ``textual.JsonText`` writes it so (-128 to 127). Here the numbers are
whole numbers from -128 to 255 (-1 and 255 are both the byte FF); a number outside that range, a
fraction, a null in the array or a value that is not an array (text too: NiFi's reader fails on
it) is a ``SchemaMismatchError`` naming the field, the record and the value. Whole columns are
converted with Arrow (``from_numbers``); records parsed in Python go through ``from_values``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flowactors.sdk.records.api import SchemaMismatchError
from flowactors.sdk.records.schema import conform
from flowactors.services.records.textual import renumbered, shown_value

__all__ = ["NUMBERS", "from_numbers", "from_values"]

#: how pyarrow parses a bytes field: an array of whole numbers
NUMBERS = pa.list_(pa.int64())
_LOW, _HIGH = -128, 255


def _not_bytes(path: str, record: int, value: object) -> SchemaMismatchError:
    return SchemaMismatchError(f"field '{path}' of record {record} holds {shown_value(value)}, where bytes are read "
                               f"from an array of whole numbers {_LOW} to {_HIGH}")


def from_numbers(lists: pa.Array, path: str, first: int) -> pa.Array:
    """Arrays of whole numbers (``NUMBERS``) as large binary: -128 to -1 are Java's signed bytes,
    0 to 255 the bytes themselves. A null element or a number outside that range raises
    ``_not_bytes`` for the field ``path`` and its record (``first`` is the first's index)."""
    flat = pc.list_flatten(lists)
    bad = pc.fill_null(pc.or_(pc.less(flat, _LOW), pc.greater(flat, _HIGH)), True)
    if len(flat) and pc.any(bad).as_py():
        at = pc.index(bad, True).as_py()
        raise _not_bytes(path, first + pc.list_parent_indices(lists)[at].as_py(), flat[at].as_py())
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)
    data = pc.bit_wise_and(flat, 255).cast(pa.uint8()).buffers()[1] or pa.py_buffer(b"")
    validity = lists.is_valid().buffers()[1] if lists.null_count else None
    return pa.Array.from_buffers(pa.large_binary(), len(lists), [validity, pa.py_buffer(offsets), data])


def from_values(values: list, field: pa.Field, first: int) -> pa.Array:
    """A bytes field's JSON values (parsed by orjson: None, lists, ...) as an array of ``field``'s
    type (``textual.rows_to_batch``'s ``bytes_of``); the first value that is not null or an array
    of whole numbers -128 to 255, or its first element that is not one, raises ``_not_bytes``, and
    an array of the wrong length for a fixed-size field a ``SchemaMismatchError``."""
    for index, value in enumerate(values):
        wrong = [v for v in value if type(v) is not int or not _LOW <= v <= _HIGH] if isinstance(value, list) \
            else [value]
        if value is not None and wrong:
            raise _not_bytes(field.name, first + index, wrong[0])
    made = from_numbers(pa.array(values, NUMBERS), field.name, first)
    try:
        return conform(pa.record_batch([made], names=[field.name]), pa.schema([field])).column(0)
    except SchemaMismatchError as err:
        raise SchemaMismatchError(renumbered(str(err), first)) from None
