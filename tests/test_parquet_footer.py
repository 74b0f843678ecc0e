"""parquet_footer.row_group_spans: the row groups' places as pyarrow's metadata gives them, for
files of every shape pyarrow writes; a damaged footer a ValueError, never the end of the process."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flowactors.services.records.parquet_footer import row_group_spans

TABLE = pa.table({"id": pa.array(range(3000), pa.int64()), "name": [f"n{i % 7}" for i in range(3000)],
                  "tags": [[i, None] if i % 3 else None for i in range(3000)],
                  "where": [{"x": i, "y": str(i)} for i in range(3000)]})


def written(**options) -> bytes:
    out = io.BytesIO()
    pq.write_table(TABLE, out, **options)
    return out.getvalue()


def pyarrows_spans(data: bytes) -> list[tuple[int, int]]:
    metadata = pq.ParquetFile(io.BytesIO(data)).metadata
    spans = []
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        chunks = [group.column(c) for c in range(group.num_columns)]
        spans.append((min(c.dictionary_page_offset or c.data_page_offset for c in chunks),
                       sum(c.total_compressed_size for c in chunks)))
    return spans


@pytest.mark.parametrize("options", [{}, {"row_group_size": 700}, {"use_dictionary": False, "compression": "none"},
                                     {"row_group_size": 1000, "compression": "zstd", "write_statistics": False},
                                     {"data_page_size": 512, "write_page_index": True, "store_schema": False}],
                         ids=["default", "row-groups", "plain", "zstd-no-stats", "small-pages-page-index"])
def test_spans_are_pyarrows(options):
    data = written(**options)
    spans = row_group_spans(io.BytesIO(data), len(data))
    assert spans == pyarrows_spans(data) and len(spans) == pq.ParquetFile(io.BytesIO(data)).metadata.num_row_groups


@pytest.mark.parametrize("damage, message", [
    (lambda d: d[:-1], "does not end in a plain footer"),
    (lambda d: d[:-8] + (len(d) * 2).to_bytes(4, "little") + b"PAR1", "does not end in a plain footer"),
    (lambda d: d[:-8] + (8).to_bytes(4, "little") + b"PAR1", "the footer"),   # 8 bytes of a column chunk read as it
    (lambda d: d[:-8 - int.from_bytes(d[-8:-4], "little")] + b"\x19" * int.from_bytes(d[-8:-4], "little") + d[-8:],
     "the footer"),
])
def test_a_damaged_footer_is_a_value_error(damage, message):
    data = damage(written(row_group_size=700))
    with pytest.raises(ValueError, match=message):
        row_group_spans(io.BytesIO(data), len(data))
