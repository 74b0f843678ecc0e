"""Scenario 16's pieces (bench/records.py): the data it writes, a flow that fails is no figure,
and a tiny run gives every row with its ratio (CI runs the scenario in `make bench-quick`; this
does not judge the numbers)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pytest

from bench import ROW_KEYS, records
from flowactors.processors.records import ConvertRecord


def test_the_csv_and_json_files_hold_the_same_records(tmp_path):
    csv_paths = records.write_data(tmp_path, "csv", 300_000, 100_000)
    json_paths = records.write_data(tmp_path, "json", 300_000, 100_000)
    assert len(csv_paths) == len(json_paths) == 3
    assert all(90_000 <= p.stat().st_size <= 110_000 for p in csv_paths + json_paths)
    from_csv = pa.concat_tables(pa_csv.read_csv(p, convert_options=pa_csv.ConvertOptions(column_types=records.COLUMNS))
                                for p in csv_paths).to_pylist()
    from_json = [json.loads(line) for p in json_paths for line in p.read_text().splitlines()]
    assert from_json[:len(from_csv)] == from_csv[:len(from_json)]
    assert [r["id"] for r in from_csv] == list(range(len(from_csv)))


def test_json_lines_are_what_json_writes():
    table = records.sales(50, 10, np.random.default_rng(1))
    lines = records.json_lines(table).decode().splitlines()
    assert [json.loads(line) for line in lines] == table.to_pylist()


def test_a_flow_that_sends_files_to_failure_is_no_figure(tmp_path):
    paths = records.write_data(tmp_path / "data", "csv", 20_000, 10_000)
    flow = records.record_flow(records.linked(paths, tmp_path / "in"), "fails", ConvertRecord, {},
                               records.JSON_READER, records.AVRO_WRITER)   # CSV read as JSON: every file fails
    with pytest.raises(RuntimeError, match="did not convert its 2 files"):
        records.run_records(flow, tmp_path / "repo", len(paths))


def test_a_tiny_run_gives_every_row_with_its_ratio(tmp_path):
    rows = records.measure(tmp_path, 2 << 20, (1 << 20, 2 << 20), 1, None)
    assert [r["metric"] for r in rows] == [f"{work}, {size} MiB FlowFiles" for size in (1, 2) for work in (
        "ConvertRecord CSV -> Parquet", "ConvertRecord JSON -> Avro", "QueryRecord parquet -> Parquet",
        "QueryRecord csv -> Parquet")]
    for r in rows:
        assert set(ROW_KEYS) <= set(r) and r["ratio"] > 0 and "the task's parts done alone: reader" in r["notes"]
