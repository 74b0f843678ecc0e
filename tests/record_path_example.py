"""The example record of the RecordPath tests (NiFi's TestRecordPath builds the same one) and the
helpers the tests evaluate paths with."""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa

from flowactors.sdk.record_path import FieldValue, compile_path

ADDRESS = pa.struct([("city", pa.string()), ("state", pa.string())])
ACCOUNT = pa.struct([("id", pa.int32()), ("balance", pa.float64()), ("address", ADDRESS)])
SCHEMA = pa.schema([
    ("id", pa.int32()), ("firstName", pa.string()), ("lastName", pa.string()), ("name", pa.string()),
    ("missing", pa.string()), ("date", pa.string()), ("attributes", pa.map_(pa.string(), pa.string())),
    ("mainAccount", ACCOUNT), ("accounts", pa.list_(ACCOUNT)), ("numbers", pa.list_(pa.int32())),
    ("friends", pa.list_(pa.string())), ("bytes", pa.list_(pa.int8())), ("shortNumber", pa.int16()),
    ("longNumber", pa.int64()), ("floatNumber", pa.float32()),
])
#: 123.45 as a float32 holds it
FLOAT32_123_45 = struct.unpack("f", struct.pack("f", 123.45))[0]


def account(id_: int = 1, balance: float = 123.45, city: str = "Boston", state: str = "Massachusetts") -> dict:
    return {"id": id_, "balance": balance, "address": {"city": city, "state": state}}


def example() -> dict:
    """A fresh example record (the field 'missing' is left out on purpose)."""
    return {
        "id": 48, "firstName": "John", "lastName": "Doe", "name": "John Doe", "date": "2017-10-20T11:00:00Z",
        "attributes": {"city": "New York", "state": "NY"},
        "mainAccount": account(),
        "accounts": [account(6, 10_000.00, "Las Vegas", "Nevada"), account(9, 48.02, "Austin", "Texas")],
        "numbers": list(range(10)), "friends": ["John", "Jane", "Jacob", "Judy"],
        "bytes": list(b"Hello World!"), "shortNumber": 123, "longNumber": 1234567890123456789,
        "floatNumber": FLOAT32_123_45,
    }


def reduced(record: dict, *names: str) -> tuple[dict, pa.Schema]:
    """The record and the schema with only the fields ``names``."""
    return {n: record.get(n) for n in names}, pa.schema([SCHEMA.field(n) for n in names])


def evaluate(path: str, record: dict, schema: pa.Schema | None = SCHEMA,
             context: FieldValue | None = None) -> list[FieldValue]:
    return compile_path(path).evaluate(record, schema, context)


def values(path: str, record: dict, schema: pa.Schema | None = SCHEMA) -> list[Any]:
    return [fv.value for fv in evaluate(path, record, schema)]


def one(path: str, record: dict, schema: pa.Schema | None = SCHEMA, context: FieldValue | None = None) -> FieldValue:
    """The first value the path selects (as NiFi's tests take it); failing when it selects none."""
    selected = evaluate(path, record, schema, context)
    assert selected, f"{path} selected nothing"
    return selected[0]


def value(path: str, record: dict, schema: pa.Schema | None = SCHEMA) -> Any:
    return one(path, record, schema).value


def assert_field(fv: FieldValue, parent: dict | None, name: str, expected: Any) -> None:
    """As NiFi's assertFieldValue: the record holding the value, the field's name, the value."""
    if parent is None:
        assert fv.parent is None
    else:
        assert fv.parent_record is parent
    assert fv.name == name
    assert fv.value == expected


def matches(path: str, record: dict, schema: pa.Schema | None = SCHEMA) -> bool:
    """Whether the path selects exactly one value (NiFi's assertMatches); False when it selects none."""
    selected = evaluate(path, record, schema)
    assert len(selected) <= 1, f"{path} selected {selected}"
    return len(selected) == 1
