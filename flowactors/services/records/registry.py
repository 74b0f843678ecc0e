"""NiFi's ``AvroSchemaRegistry``: schemas by name, each a dynamic property whose value is an Avro
schema's JSON text.

The schemas are checked when the flow validates (``custom_validate``): each must parse, and with
``Validation Strategy`` "Validate Schemas" (the default) its names must be Avro's and its
defaults fit their fields. Enabling parses each once into an Arrow schema
(``flowactors.sdk.records.schema.avro_to_arrow``), named after its property; ``retrieve_schema``
hands those out.
"""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from flowactors.sdk.processor import PropertyDescriptor
from flowactors.sdk.records import RecordError, SchemaNotFoundError, SchemaRegistry
from flowactors.sdk.records.access import with_name
from flowactors.sdk.records.schema import avro_to_arrow, printable
from flowactors.sdk.services import ControllerService, ServiceContext

VALIDATE, DO_NOT_VALIDATE = "Validate Schemas", "Do Not Validate Schemas"

VALIDATION_STRATEGY = PropertyDescriptor(
    "Validation Strategy", "Whether each schema's field names and namespaces must be Avro names and its defaults "
    "must fit their fields", required=True, default=VALIDATE, allowable_values=(VALIDATE, DO_NOT_VALIDATE))


class AvroSchemaRegistry(ControllerService, SchemaRegistry):
    """Avro schemas by name: each dynamic property is a schema's name and its Avro JSON text."""

    description = "Holds Avro schemas by name: each dynamic property is a schema name and its Avro schema text"
    properties = (VALIDATION_STRATEGY,)
    dynamic_properties = True
    #: NiFi's internal names; its obsolete true/false property became the strategy
    NIFI_PROPERTY_NAMES = {"Validation Strategy": "Validation Strategy", "avro-reg-validated-field-names":
                           "Validation Strategy", "Validate Field Names": "Validation Strategy"}
    NIFI_VALUES = {"Validation Strategy": {"VALIDATE": VALIDATE, "NONE": DO_NOT_VALIDATE, "true": VALIDATE,
                                           "false": DO_NOT_VALIDATE}}

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        strict = values.get("Validation Strategy", VALIDATE) == VALIDATE
        problems = []
        for name, text in values.items():
            if name in self.descriptor_map():
                continue
            if not text.strip():
                problems.append(f"schema '{name}' is empty")
                continue
            try:
                avro_to_arrow(text, strict=strict)
            except RecordError as err:
                problems.append(f"schema '{name}': {err}")
        return problems

    def on_enabled(self, context: ServiceContext) -> None:
        strict = context.property("Validation Strategy").raw == VALIDATE
        self._schemas = {name: with_name(avro_to_arrow(text, strict=strict), name)
                         for name, text in sorted(context.dynamic_properties.items())}

    def schema_names(self) -> list[str]:
        return list(self._schemas)

    def retrieve_schema(self, name: str, version: int | None = None, branch: str | None = None) -> pa.Schema:
        """The schema registered as ``name`` (this registry keeps one version of each, and no branches)."""
        schema = self._schemas.get(name)
        if schema is None:
            raise SchemaNotFoundError(f"the schema registry has no schema named '{printable(name, 80)}' (it has: "
                                      f"{', '.join(self._schemas) or 'none'})")
        return schema
