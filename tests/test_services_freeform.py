"""FreeFormTextRecordSetWriter: NiFi's TestFreeFormTextRecordSetWriter cases, plus the
expression language over fields, nulls, formats and character sets (docs/records/freeform.md)."""

from __future__ import annotations

import datetime
import io

import pyarrow as pa
import pytest

from flowactors.sdk.records import RecordError
from flowactors.services.records.freeform import FreeFormTextRecordSetWriter
from flowactors.testing import enable_service

TEXT = "ID: ${ID}, Name: ${NAME}, Age: ${AGE}, Country: ${COUNTRY}, Username: ${my.user.name}"
PEOPLE = pa.record_batch({"ID": ["ABC123", "ABC123"], "NAME": ["John Doe", "John Doe"],
                          "AGE": pa.array([22, 22], pa.int32()), "COUNTRY": ["USA", "USA"]})


def write(batches: list[pa.RecordBatch], properties: dict, attributes: dict | None = None) -> tuple[bytes, object]:
    service = enable_service(FreeFormTextRecordSetWriter, properties)
    out = io.BytesIO()
    schema = service.write_schema(attributes or {}, batches[0].schema)
    writer = service.create_writer(schema, out, attributes or {})
    for batch in batches:
        writer.write_batch(batch)
    return out.getvalue(), writer.finish()


def test_fields_and_attributes_one_line_a_record():
    # NiFi's testDefault
    content, result = write([PEOPLE], {"Text": TEXT}, {"my.user.name": "jdoe64"})
    assert content.decode() == ("ID: ABC123, Name: John Doe, Age: 22, Country: USA, Username: jdoe64\n"
                                "ID: ABC123, Name: John Doe, Age: 22, Country: USA, Username: jdoe64\n")
    assert result.record_count == 2 and result.attributes == {"mime.type": "text/plain"}


def test_a_field_wins_over_an_attribute_of_its_name():
    # NiFi's testDefaultSingleRecord: the ID attribute does not override the ID field
    content, _ = write([PEOPLE.slice(0, 1)], {"Text": TEXT}, {"ID": "jdoe64"})
    assert content.decode() == "ID: ABC123, Name: John Doe, Age: 22, Country: USA, Username: \n"


def test_a_null_field_lets_the_attribute_through():
    batch = pa.record_batch({"ID": pa.array([None, "x"], pa.string())})
    content, _ = write([batch], {"Text": "${ID}"}, {"ID": "from attribute"})
    assert content.decode() == "from attribute\nx\n"


def test_expression_functions_apply_to_field_values():
    content, _ = write([PEOPLE.slice(0, 1)], {"Text": "${NAME:toUpper()} is ${AGE:plus(1)} next year"})
    assert content == b"JOHN DOE is 23 next year\n"


def test_values_are_written_as_nifi_writes_them_as_text():
    batch = pa.record_batch({"d": [1.0], "b": [True], "t": pa.array([1000], pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
                             "r": pa.array([{"a": 1}])})
    content, _ = write([batch], {"Text": "${d} ${b} ${t} ${r}"})
    assert content == b'1.0 true 1000 {"a":1}\n'


def test_records_across_batches_and_none():
    content, result = write([PEOPLE.slice(0, 1), PEOPLE.slice(0, 0), PEOPLE.slice(1, 1)], {"Text": "${ID}"})
    assert content == b"ABC123\nABC123\n" and result.record_count == 2
    assert write([PEOPLE.slice(0, 0)], {"Text": "${ID}"})[0] == b""


def test_the_character_set():
    batch = pa.record_batch({"name": ["Müller"]})
    assert write([batch], {"Text": "${name}", "Character Set": "ISO-8859-1"})[0] == "Müller\n".encode("iso-8859-1")
    with pytest.raises(ValueError, match="character set"):
        enable_service(FreeFormTextRecordSetWriter, {"Text": "x", "Character Set": "no-such-set"})


def test_text_is_required_and_checked():
    with pytest.raises(ValueError, match="'Text' is required"):
        enable_service(FreeFormTextRecordSetWriter, {})
    with pytest.raises(ValueError, match="Text"):
        enable_service(FreeFormTextRecordSetWriter, {"Text": "${unclosed"})


def test_a_failing_expression_names_the_record():
    batch = pa.record_batch({"n": ["2", "1"]})
    with pytest.raises(RecordError, match="record 1"):
        write([batch], {"Text": "${n:toNumber():divide(${n:toNumber():minus(1)})}"})


def test_the_schema_is_the_records_own():
    service = enable_service(FreeFormTextRecordSetWriter, {"Text": "x"})
    assert service.write_schema({}, PEOPLE.schema) == PEOPLE.schema and service.mime_type() == "text/plain"


def test_a_date_field_without_a_format_is_milliseconds():
    batch = pa.record_batch({"d": pa.array([datetime.date(1970, 1, 2)])})
    assert write([batch], {"Text": "${d}"})[0] == b"86400000\n"
