"""XMLReader and XMLRecordSetWriter: cases taken from NiFi's TestXMLRecordReader, TestXMLReader,
TestInferXmlSchema, TestWriteXMLResult and TestXMLRecordSetWriter, plus streaming
(docs/records/xml.md)."""

from __future__ import annotations

import datetime
import io
import json
from functools import partial

import pyarrow as pa
import pytest

from flowactors.sdk.records import MalformedRecordError, RecordError, SchemaMismatchError
from flowactors.services.records import xml as xml_service
from flowactors.services.records.schema_cache import VolatileSchemaCache
from flowactors.services.records.xml import XMLReader, XMLRecordSetWriter
from flowactors.testing import enable_service
from tests.records_helpers import read_records, service_reader

# NiFi's people.xml
PEOPLE = b"""<PEOPLE attr="attr1">
    <PERSON ID="P1"><NAME>Cleve Butler</NAME><AGE>42</AGE><COUNTRY>USA</COUNTRY></PERSON>
    <PERSON ID="P2"><NAME>Ainslie Fletcher</NAME><AGE>33</AGE><COUNTRY>UK</COUNTRY></PERSON>
    <PERSON ID="P3"><NAME>Am\xc3\xa9lie Bonfils</NAME><AGE>74</AGE><COUNTRY>FR</COUNTRY></PERSON>
    <PERSON ID="P4"><NAME>Elenora Scrivens</NAME><AGE>16</AGE><COUNTRY>USA</COUNTRY></PERSON>
</PEOPLE>"""
ARRAY = {"Expect Records as Array": "true"}


def avro(fields: list, name: str = "PERSON") -> str:
    return json.dumps({"type": "record", "name": name, "fields": fields})


SIMPLE = avro([{"name": "NAME", "type": ["null", "string"]}, {"name": "AGE", "type": ["null", "int"]},
               {"name": "COUNTRY", "type": ["null", "string"]}])


def given(schema: str, **more: str) -> dict:
    return {"Schema Access Strategy": "Use 'Schema Text' Property", "Schema Text": schema, **ARRAY, **more}


reader = partial(service_reader, XMLReader)
read = partial(read_records, XMLReader)


# ---------------------------------------------------------------------------------- reading
def test_records_in_a_wrapper():
    # NiFi's testSimpleRecord
    _, records = read(PEOPLE, given(SIMPLE))
    assert records == [{"NAME": "Cleve Butler", "AGE": 42, "COUNTRY": "USA"},
                       {"NAME": "Ainslie Fletcher", "AGE": 33, "COUNTRY": "UK"},
                       {"NAME": "Amélie Bonfils", "AGE": 74, "COUNTRY": "FR"},
                       {"NAME": "Elenora Scrivens", "AGE": 16, "COUNTRY": "USA"}]


def test_attributes_are_fields():
    # NiFi's testSimpleRecordWithAttribute: ID is an attribute of PERSON
    schema = avro([{"name": "NAME", "type": "string"}, {"name": "ID", "type": "string"}])
    assert [r["ID"] for r in read(PEOPLE, given(schema))[1]] == ["P1", "P2", "P3", "P4"]


def test_an_attribute_prefix():
    # NiFi's testSimpleRecordWithAttribute2
    schema = avro([{"name": "NAME", "type": "string"}, {"name": "ATTR_ID", "type": "string"}])
    assert read(PEOPLE, given(schema, **{"Attribute Prefix": "ATTR_"}))[1][0] == {"NAME": "Cleve Butler",
                                                                                  "ATTR_ID": "P1"}


def test_attributes_not_parsed():
    schema, records = read(PEOPLE, {**ARRAY, "Parse XML Attributes": "false"})
    assert schema.names == ["NAME", "AGE", "COUNTRY"]


def test_an_element_with_an_attribute_as_a_record():
    # NiFi's testSimpleTypeWithAttributeAsRecord (people3.xml)
    data = (b'<PEOPLE><PERSON><NAME ID="name1">Cleve Butler</NAME><AGE ID="age1">42</AGE></PERSON>'
            b'<PERSON><NAME ID="name2">Ainslie Fletcher</NAME><AGE ID="age2">33</AGE></PERSON></PEOPLE>')
    schema = avro([{"name": "NAME", "type": {"type": "record", "name": "n", "fields": [
        {"name": "ID", "type": "string"}, {"name": "CONTENT", "type": "string"}]}},
        {"name": "AGE", "type": {"type": "record", "name": "a", "fields": [
            {"name": "ID", "type": "string"}, {"name": "CONTENT", "type": "int"}]}}])
    _, records = read(data, given(schema, **{"Field Name for Content": "CONTENT"}))
    assert records == [{"NAME": {"ID": "name1", "CONTENT": "Cleve Butler"}, "AGE": {"ID": "age1", "CONTENT": 42}},
                       {"NAME": {"ID": "name2", "CONTENT": "Ainslie Fletcher"}, "AGE": {"ID": "age2", "CONTENT": 33}}]


def test_a_scalar_field_takes_the_text_of_an_element_with_attributes():
    # NiFi's testSimpleTypeWithAttributesIgnored
    data = b'<PEOPLE><PERSON><NAME ID="name1">Cleve Butler</NAME><AGE ID="age1">42</AGE></PERSON></PEOPLE>'
    assert read(data, given(SIMPLE))[1] == [{"NAME": "Cleve Butler", "AGE": 42, "COUNTRY": None}]


def test_namespaces_are_dropped_from_names():
    # NiFi's testNameSpaces and testAttributeWithNameSpace
    data = (b'<wd:entry xmlns:wd="urn:org.apache.nifi/foo"><wd:PERSON wd:id="x"><wd:NAME>Cleve</wd:NAME>'
            b'</wd:PERSON></wd:entry>')
    assert read(data, ARRAY)[1] == [{"id": "x", "NAME": "Cleve"}]


def test_cdata_and_entities():
    # NiFi's testCData
    data = b"<PEOPLE><PERSON><NAME><![CDATA[Cleve <Butler>]]></NAME><AGE>42</AGE><COUNTRY>A &amp; B</COUNTRY></PERSON></PEOPLE>"
    assert read(data, given(SIMPLE))[1] == [{"NAME": "Cleve <Butler>", "AGE": 42, "COUNTRY": "A & B"}]


def test_empty_fields_are_null():
    # NiFi's testParseEmptyFields
    data = b"<PEOPLE><PERSON><NAME></NAME><AGE/><COUNTRY>  </COUNTRY></PERSON></PEOPLE>"
    assert read(data, given(SIMPLE))[1] == [{"NAME": None, "AGE": None, "COUNTRY": None}]


def test_a_single_record_without_a_wrapper():
    # NiFi's testSingleRecord
    data = b'<PERSON ID="P1"><NAME>Cleve Butler</NAME><AGE>42</AGE><COUNTRY>USA</COUNTRY></PERSON>'
    assert read(data, {**given(SIMPLE), "Expect Records as Array": "false"})[1] == [
        {"NAME": "Cleve Butler", "AGE": 42, "COUNTRY": "USA"}]


def test_whether_records_are_an_array_comes_from_an_attribute():
    properties = {"Expect Records as Array": "${xml.stream.is.array}"}
    assert len(read(PEOPLE, properties, {"xml.stream.is.array": "true"})[1]) == 4
    assert len(read(PEOPLE, properties, {"xml.stream.is.array": "FALSE"})[1]) == 1
    with pytest.raises(MalformedRecordError, match="neither 'true' nor 'false'"):
        reader(PEOPLE, properties, {})


def test_nested_records_and_repeated_elements():
    # NiFi's testNestedRecord and testSimpleArray: one CHILD is an array of one
    data = (b"<PEOPLE><PERSON><NAME>Cleve</NAME><ADDRESS><STREET>292 West Street</STREET><CITY>Jersey City</CITY>"
            b"</ADDRESS><CHILD>Tom</CHILD><CHILD>Anna</CHILD></PERSON>"
            b"<PERSON><NAME>Ainslie</NAME><CHILD>Ben</CHILD></PERSON></PEOPLE>")
    schema, records = read(data, ARRAY)
    assert schema.field("ADDRESS").type == pa.struct([("STREET", pa.string()), ("CITY", pa.string())])
    assert schema.field("CHILD").type == pa.list_(pa.string())
    assert records[0]["ADDRESS"] == {"STREET": "292 West Street", "CITY": "Jersey City"}
    assert [r["CHILD"] for r in records] == [["Tom", "Anna"], ["Ben"]]


def test_a_map_field():
    # NiFi's testMap
    data = b"<PEOPLE><PERSON><NAME>Cleve</NAME><CHILDREN><CHILD1>Tom</CHILD1><CHILD2>Anna</CHILD2></CHILDREN></PERSON></PEOPLE>"
    schema = avro([{"name": "NAME", "type": "string"}, {"name": "CHILDREN", "type": {"type": "map", "values": "string"}}])
    assert read(data, given(schema))[1] == [{"NAME": "Cleve", "CHILDREN": [("CHILD1", "Tom"), ("CHILD2", "Anna")]}]


def test_text_beside_elements_goes_to_the_content_field():
    # NiFi's testTagInCharactersRecord
    data = b"<PEOPLE><PERSON>Some text<NAME>Cleve</NAME> and more</PERSON></PEOPLE>"
    _, records = read(data, {**ARRAY, "Field Name for Content": "CONTENT"})
    assert records == [{"NAME": "Cleve", "CONTENT": "Some text and more"}]


def test_inferred_types_and_schema_name():
    # NiFi's TestInferXmlSchema: numbers, booleans and text; the records' element names the schema
    data = (b"<ROOT><PERSON><NAME>A</NAME><AGE>42</AGE><RATE>1.5</RATE><OK>true</OK><BIG>3000000000</BIG>"
            b"<DOB>01/01/1983</DOB></PERSON><PERSON><NAME>B</NAME><AGE>7</AGE><RATE>2</RATE><OK>false</OK>"
            b"<BIG>1</BIG><DOB>12/31/1999</DOB></PERSON></ROOT>")
    schema, records = read(data, {**ARRAY, "Date Format": "MM/dd/yyyy"})
    assert dict(zip(schema.names, schema.types)) == {"NAME": pa.string(), "AGE": pa.int32(), "RATE": pa.float64(),
                                                      "OK": pa.bool_(), "BIG": pa.int64(), "DOB": pa.date32()}
    assert schema.metadata[b"nifi.schema.name"] == b"PERSON"
    assert records[1]["DOB"] == datetime.date(1999, 12, 31)


def test_a_value_that_does_not_fit_the_schema():
    data = b"<PEOPLE><PERSON><NAME>A</NAME><AGE>42</AGE></PERSON><PERSON><NAME>B</NAME><AGE>old</AGE></PERSON></PEOPLE>"
    with pytest.raises(SchemaMismatchError, match="field 'AGE' of record 1 is \"old\""):
        read(data, given(SIMPLE))


# ---------------------------------------------------------------------------------- malformed content
def test_invalid_xml_gives_the_records_before_it_then_fails():
    # NiFi's testInvalidXml (people_invalid.xml: the third PERSON has no start tag)
    data = PEOPLE.replace(b'<PERSON ID="P3">', b"")
    records = reader(data, given(SIMPLE))
    got = []
    with pytest.raises(MalformedRecordError, match=r"mismatch.*line 4") as caught:
        for batch in records.batches():
            got.extend(batch.to_pylist())
    assert [r["NAME"] for r in got][:2] == ["Cleve Butler", "Ainslie Fletcher"]
    assert caught.value.record == len(got)


@pytest.mark.parametrize("data", [b"", b'<?xml version="1.0" encoding="utf-8"?>'])
def test_an_empty_content_is_malformed(data):
    # NiFi's testEmptyStreamAsSingleRecord, testEmptyStreamWIthXmlHeader
    with pytest.raises(MalformedRecordError, match="not valid XML"):
        read(data, given(SIMPLE))


def test_an_empty_wrapper_has_no_records():
    # NiFi's testParseEmptyArray
    assert read(b"<root></root>", given(SIMPLE))[1] == []


# ---------------------------------------------------------------------------------- streaming
def test_a_large_document_comes_out_a_batch_at_a_time(monkeypatch):
    monkeypatch.setattr(xml_service, "BATCH_RECORDS", 100)
    monkeypatch.setattr(xml_service, "_READ", 4096)
    data = b"<ROOT>" + b"".join(b"<R><ID>%d</ID><NAME>n%d</NAME></R>" % (i, i) for i in range(5000)) + b"</ROOT>"

    class Counting(io.BytesIO):
        read_bytes = 0

        def read(self, size=-1):
            chunk = super().read(size)
            Counting.read_bytes += len(chunk)
            return chunk

    stream = Counting(data)
    schema = avro([{"name": "ID", "type": "int"}, {"name": "NAME", "type": "string"}], "R")
    batches = enable_service(XMLReader, given(schema)).create_reader({}, stream, len(data)).batches()
    first = next(batches)
    assert first.num_rows == 100 and Counting.read_bytes < len(data) / 4
    table = pa.Table.from_batches([first, *batches])
    assert table.num_rows == 5000 and table.column("ID").to_pylist() == list(range(5000))


# ---------------------------------------------------------------------------------- writing
def write(batches: list[pa.RecordBatch], properties: dict | None = None, schema: pa.Schema | None = None):
    service = enable_service(XMLRecordSetWriter, properties or {})
    out = io.BytesIO()
    writer = service.create_writer(schema or batches[0].schema, out, {})
    for batch in batches:
        writer.write_batch(batch)
    result = writer.finish()
    return out.getvalue().decode(), result


TAGS = {"Name of Root Tag": "ROOT", "Name of Record Tag": "PERSON", "Omit XML Declaration": "true"}
PEOPLE_BATCH = pa.record_batch({"NAME": ["Cleve Butler", "Ainslie Fletcher"], "AGE": pa.array([42, 33], pa.int32()),
                                "COUNTRY": ["USA", "UK"]})
WITH_NULLS = pa.record_batch({"NAME": pa.array([None, None], pa.string()), "AGE": pa.array([42, 33], pa.int32()),
                              "COUNTRY": ["USA", "UK"]})


def test_a_single_record_needs_no_root():
    # NiFi's testSingleRecord
    text, result = write([PEOPLE_BATCH.slice(0, 1)], {"Name of Record Tag": "PERSON"})
    assert text == '<?xml version="1.0" ?><PERSON><NAME>Cleve Butler</NAME><AGE>42</AGE><COUNTRY>USA</COUNTRY></PERSON>'
    assert result.attributes["mime.type"] == "application/xml"


def test_several_records_need_a_root():
    # NiFi's testRootNameIsNull
    with pytest.raises(RecordError, match="Name of Root Tag"):
        write([PEOPLE_BATCH], {"Name of Record Tag": "PERSON"})


def test_records_in_the_root():
    # NiFi's testSimpleRecord and testSimpleRecordWithXMLDeclaration
    assert write([PEOPLE_BATCH], TAGS)[0] == (
        "<ROOT><PERSON><NAME>Cleve Butler</NAME><AGE>42</AGE><COUNTRY>USA</COUNTRY></PERSON>"
        "<PERSON><NAME>Ainslie Fletcher</NAME><AGE>33</AGE><COUNTRY>UK</COUNTRY></PERSON></ROOT>")
    assert write([PEOPLE_BATCH], {**TAGS, "Omit XML Declaration": "false"})[0].startswith(
        '<?xml version="1.0" ?><ROOT><PERSON>')


def test_null_suppression():
    # NiFi's testSimpleRecordWithNullValues{AlwaysSuppress,NeverSuppress,SuppressMissing}
    assert write([WITH_NULLS], {**TAGS, "Suppress Null Values": "Always Suppress"})[0] == (
        "<ROOT><PERSON><AGE>42</AGE><COUNTRY>USA</COUNTRY></PERSON><PERSON><AGE>33</AGE><COUNTRY>UK</COUNTRY></PERSON></ROOT>")
    assert write([WITH_NULLS], {**TAGS, "Suppress Null Values": "Never Suppress"})[0].startswith(
        "<ROOT><PERSON><NAME></NAME><AGE>42</AGE>")
    missing = pa.record_batch({"AGE": pa.array([42], pa.int32())})
    schema = pa.schema([("NAME", pa.string()), ("AGE", pa.int32())])
    assert write([missing], {**TAGS, "Suppress Null Values": "Suppress Missing Values"}, schema)[0] == \
        "<ROOT><PERSON><AGE>42</AGE></PERSON></ROOT>"
    assert write([missing], {**TAGS, "Suppress Null Values": "Never Suppress"}, schema)[0] == \
        "<ROOT><PERSON><NAME></NAME><AGE>42</AGE></PERSON></ROOT>"


def test_no_records_is_an_empty_root():
    # NiFi's testEmptyRecordWithEmptySchema
    empty = pa.record_batch({"NAME": pa.array([], pa.string())})
    assert write([empty], TAGS)[0] == "<ROOT></ROOT>"


def test_nested_records():
    # NiFi's testNestedRecord and testNestedRecordWithOnlyNullValues{AlwaysSuppress,NeverSuppress}
    address = pa.struct([("STREET", pa.string()), ("CITY", pa.string())])
    batch = pa.record_batch({"NAME": ["Cleve"], "ADDRESS": pa.array([{"STREET": "292 West Street", "CITY": "Jersey City"}],
                                                                   address)})
    assert write([batch], TAGS)[0] == ("<ROOT><PERSON><NAME>Cleve</NAME><ADDRESS><STREET>292 West Street</STREET>"
                                       "<CITY>Jersey City</CITY></ADDRESS></PERSON></ROOT>")
    nulls = pa.record_batch({"NAME": ["Cleve"], "ADDRESS": pa.array([{"STREET": None, "CITY": None}], address)})
    assert write([nulls], {**TAGS, "Suppress Null Values": "Always Suppress"})[0] == \
        "<ROOT><PERSON><NAME>Cleve</NAME></PERSON></ROOT>"
    assert write([nulls], {**TAGS, "Suppress Null Values": "Never Suppress"})[0] == \
        "<ROOT><PERSON><NAME>Cleve</NAME><ADDRESS><STREET></STREET><CITY></CITY></ADDRESS></PERSON></ROOT>"


CHILDREN = pa.record_batch({"CHILDREN": pa.array([["Tom", None, "Ben"]]), "NAME": ["Cleve"]})


def test_arrays_and_their_wrapping():
    # NiFi's testSimpleArray*, testSimpleArrayPropAsWrapper, testSimpleArrayPropForElem
    always = {**TAGS, "Suppress Null Values": "Always Suppress"}
    assert write([CHILDREN], always)[0] == \
        "<ROOT><PERSON><CHILDREN>Tom</CHILDREN><CHILDREN>Ben</CHILDREN><NAME>Cleve</NAME></PERSON></ROOT>"
    assert write([CHILDREN], TAGS)[0] == \
        "<ROOT><PERSON><CHILDREN>Tom</CHILDREN><CHILDREN></CHILDREN><CHILDREN>Ben</CHILDREN><NAME>Cleve</NAME></PERSON></ROOT>"
    wrapper = {**always, "Wrap Elements of Arrays": "Use Property as Wrapper", "Array Tag Name": "ARRAY"}
    assert write([CHILDREN], wrapper)[0] == \
        "<ROOT><PERSON><ARRAY><CHILDREN>Tom</CHILDREN><CHILDREN>Ben</CHILDREN></ARRAY><NAME>Cleve</NAME></PERSON></ROOT>"
    elements = {**always, "Wrap Elements of Arrays": "Use Property for Elements", "Array Tag Name": "ELEM"}
    assert write([CHILDREN], elements)[0] == \
        "<ROOT><PERSON><CHILDREN><ELEM>Tom</ELEM><ELEM>Ben</ELEM></CHILDREN><NAME>Cleve</NAME></PERSON></ROOT>"


def test_an_empty_array():
    # NiFi's testEmptyArray and testEmptyArrayNeverSupressPropAsWrapper
    empty = pa.record_batch({"CHILDREN": pa.array([[]], pa.list_(pa.string())), "NAME": ["Cleve"]})
    assert write([empty], {**TAGS, "Suppress Null Values": "Always Suppress"})[0] == \
        "<ROOT><PERSON><NAME>Cleve</NAME></PERSON></ROOT>"
    wrapper = {**TAGS, "Wrap Elements of Arrays": "Use Property as Wrapper", "Array Tag Name": "ARRAY"}
    assert write([empty], wrapper)[0] == "<ROOT><PERSON><ARRAY></ARRAY><NAME>Cleve</NAME></PERSON></ROOT>"


def test_wrapping_needs_an_array_tag_name():
    with pytest.raises(ValueError, match="Array Tag Name"):
        enable_service(XMLRecordSetWriter, {"Wrap Elements of Arrays": "Use Property as Wrapper"})


def test_maps():
    # NiFi's testSimpleMapNeverSuppressHasNull
    batch = pa.record_batch({"CHILDREN": pa.array([[("CHILD1", "Tom"), ("CHILD3", "Ben"), ("CHILD2", None)]],
                                                  pa.map_(pa.string(), pa.string()))})
    assert write([batch], TAGS)[0] == \
        "<ROOT><PERSON><CHILDREN><CHILD1>Tom</CHILD1><CHILD3>Ben</CHILD3><CHILD2></CHILD2></CHILDREN></PERSON></ROOT>"


def test_pretty_print():
    text, _ = write([PEOPLE_BATCH], {**TAGS, "Omit XML Declaration": "false", "Pretty Print XML": "true"})
    assert text == """<?xml version="1.0" ?><ROOT>
    <PERSON>
        <NAME>Cleve Butler</NAME>
        <AGE>42</AGE>
        <COUNTRY>USA</COUNTRY>
    </PERSON>
    <PERSON>
        <NAME>Ainslie Fletcher</NAME>
        <AGE>33</AGE>
        <COUNTRY>UK</COUNTRY>
    </PERSON>
</ROOT>"""


def test_the_record_tag_comes_from_the_schema_name():
    # NiFi's testRecordNameIsNullSchemaIdentifierExists / Missing
    named = PEOPLE_BATCH.schema.with_metadata({b"nifi.schema.name": b"org.example.PERSON"})
    assert write([PEOPLE_BATCH.slice(0, 1)], {"Omit XML Declaration": "true"}, named)[0].startswith("<PERSON><NAME>")
    with pytest.raises(RecordError, match="Name of Record Tag"):
        write([PEOPLE_BATCH.slice(0, 1)], {})


def test_text_is_escaped_and_dates_formatted():
    batch = pa.record_batch({"TEXT": ["a < b & c > d"], "DOB": pa.array([datetime.date(1983, 1, 1)])})
    assert write([batch], {**TAGS, "Date Format": "MM/dd/yyyy"})[0] == \
        "<ROOT><PERSON><TEXT>a &lt; b &amp; c &gt; d</TEXT><DOB>01/01/1983</DOB></PERSON></ROOT>"


def test_written_xml_reads_back():
    rows = [{"NAME": f"n{i} <&>", "AGE": i, "KIDS": ["a", "b"], "ADDR": {"CITY": "c"}} for i in range(20)]
    text, _ = write([pa.RecordBatch.from_pylist(rows)], TAGS)
    assert read(text.encode(), ARRAY)[1] == rows


def test_a_schema_cache_keeps_the_schema_written_and_names_it():
    """NiFi's SchemaRegistryRecordSetWriter with a 'Schema Cache': the schema the records are
    written with (here a given one, without the records' COUNTRY) is cached, its identifier the
    FlowFile's ``schema.cache.identifier``."""
    assert XMLRecordSetWriter.NIFI_PROPERTY_NAMES["schema-cache"] in XMLRecordSetWriter.descriptor_map()
    schema = avro([{"name": "NAME", "type": ["null", "string"]}, {"name": "AGE", "type": ["null", "int"]}])
    service = enable_service(XMLRecordSetWriter, {**TAGS, "Schema Cache": "cache", "Schema Text": schema,
                                                  "Schema Access Strategy": "Use 'Schema Text' Property"},
                             services={"cache": (VolatileSchemaCache, {})})
    writer = service.create_writer(service.write_schema({}, PEOPLE_BATCH.schema), out := io.BytesIO(), {})
    writer.write_batch(PEOPLE_BATCH)
    attributes = writer.finish().attributes
    kept = service._context.service("Schema Cache").get_schema(attributes["schema.cache.identifier"])
    assert kept.names == ["NAME", "AGE"] and kept.field("AGE").type == pa.int32()
    assert out.getvalue().decode() == ("<ROOT><PERSON><NAME>Cleve Butler</NAME><AGE>42</AGE></PERSON>"
                                       "<PERSON><NAME>Ainslie Fletcher</NAME><AGE>33</AGE></PERSON></ROOT>")


def test_nifi_names_for_the_import():
    assert XMLReader.NIFI_PROPERTY_NAMES["record_format"] == "Expect Records as Array"
    assert XMLRecordSetWriter.NIFI_PROPERTY_NAMES["root_tag_name"] == "Name of Root Tag"
    assert XMLRecordSetWriter.NIFI_VALUES["Wrap Elements of Arrays"]["no-wrapping"] == "No Wrapping"
