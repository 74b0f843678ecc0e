"""AvroSchemaRegistry (flowactors.services.records.registry): cases from NiFi's TestAvroSchemaRegistry."""

from __future__ import annotations

import json

import pytest

from flowactors.sdk.records import SCHEMA_NAME_KEY, SchemaNotFoundError, SchemaRegistry
from flowactors.sdk.records.schema import AVRO_SCHEMA_TEXT, arrow_to_avro
from flowactors.services.records.registry import AvroSchemaRegistry
from flowactors.testing import enable_service


def user(name: str = "User", namespace: str = "example.avro", first: str = "name", foo: dict | None = None) -> str:
    foo = foo or {"name": "foo", "type": ["int", "null"]}
    return json.dumps({"namespace": namespace, "type": "record", "name": name, "fields": [
        {"name": first, "type": ["string", "null"]}, {"name": "favorite_number", "type": ["int", "null"]}, foo,
        {"name": "favorite_color", "type": ["string", "null"]}]})


INVALID = {
    "namespace separator other than a period": user(namespace="example-avro"),
    "illegal character in record name": user(name="$User"),
    "illegal character in field name": user(first="@name"),
    "default not of the field's type": user(foo={"name": "foo", "type": "int", "default": "NAN"}),
    "default not of the union's types": user(foo={"name": "foo", "type": ["int", "null"], "default": "NAN"}),
}


def test_registered_schema_is_retrieved_with_its_name_and_text():
    registry = enable_service(AvroSchemaRegistry, {"fooSchema": user()})
    assert isinstance(registry, SchemaRegistry)
    schema = registry.retrieve_schema("fooSchema")
    assert schema.names == ["name", "favorite_number", "foo", "favorite_color"]
    assert schema.metadata[SCHEMA_NAME_KEY] == b"fooSchema"
    assert schema.metadata[AVRO_SCHEMA_TEXT] == user().encode()
    assert arrow_to_avro(schema) == json.loads(user())
    assert registry.schema_names() == ["fooSchema"]


def test_a_name_it_lacks_says_which_it_has():
    registry = enable_service(AvroSchemaRegistry, {"fooSchema": user(), "barSchema": user(name="Bar")})
    with pytest.raises(SchemaNotFoundError, match="no schema named 'bazSchema' \\(it has: barSchema, fooSchema\\)"):
        registry.retrieve_schema("bazSchema")
    with pytest.raises(SchemaNotFoundError, match="it has: none"):
        enable_service(AvroSchemaRegistry).retrieve_schema("fooSchema")


@pytest.mark.parametrize("text", INVALID.values(), ids=INVALID.keys())
def test_schemas_validated(text):
    with pytest.raises(ValueError, match="schema 'fooSchema': the Avro schema is not valid"):
        enable_service(AvroSchemaRegistry, {"fooSchema": text, "Validation Strategy": "Validate Schemas"})


@pytest.mark.parametrize("text", INVALID.values(), ids=INVALID.keys())
def test_schemas_not_validated(text):
    registry = enable_service(AvroSchemaRegistry, {"fooSchema": text, "Validation Strategy": "Do Not Validate Schemas"})
    assert len(registry.retrieve_schema("fooSchema")) == 4


@pytest.mark.parametrize("strategy", ["Validate Schemas", "Do Not Validate Schemas"])
def test_duplicate_fields_invalid_regardless_of_validation(strategy):
    text = user(foo={"name": "favorite_number", "type": ["int", "null"]})
    with pytest.raises(ValueError, match="the field name 'favorite_number' is used twice"):
        enable_service(AvroSchemaRegistry, {"fooSchema": text, "Validation Strategy": strategy})


@pytest.mark.parametrize("text, message", [
    ("{not json", "schema 'fooSchema': the Avro schema is not JSON at line 1, column 2"),
    ("   ", "schema 'fooSchema' is empty")])
def test_text_that_is_not_a_schema_is_invalid_when_the_flow_validates(text, message):
    problems = AvroSchemaRegistry.validate_properties({"fooSchema": text})
    assert len(problems) == 1 and problems[0].startswith(message)


def test_nifi_import_tables():
    values = AvroSchemaRegistry.NIFI_VALUES["Validation Strategy"]
    assert (values["VALIDATE"], values["NONE"]) == ("Validate Schemas", "Do Not Validate Schemas")
    assert (values["true"], values["false"]) == ("Validate Schemas", "Do Not Validate Schemas")
    assert AvroSchemaRegistry.NIFI_PROPERTY_NAMES["avro-reg-validated-field-names"] == "Validation Strategy"
