"""NiFi's JSON processors: EvaluateJsonPath, SplitJson, FlattenJson, AttributesToJSON,
AttributesToCSV and ValidateJson, with a JsonPath of Jayway's semantics (``jsonpath``);
docs/json-processors.md describes them."""

from flowactors.processors.json.attributes_to import AttributesToCSV, AttributesToJSON
from flowactors.processors.json.evaluate import EvaluateJsonPath
from flowactors.processors.json.flatten import FlattenJson
from flowactors.processors.json.split import SplitJson
from flowactors.processors.json.validate import ValidateJson

__all__ = ["AttributesToCSV", "AttributesToJSON", "EvaluateJsonPath", "FlattenJson", "SplitJson", "ValidateJson"]
