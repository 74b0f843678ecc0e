"""The standard processors, importable by name (``flowactors.processors.GenerateFlowFile``).

A flow definition may name them without a module (``"type": "GenerateFlowFile"``). Each family
lives in its own module; docs/processors.md describes every processor.
"""

from flowactors.processors.attributes import ExtractText, LogAttribute, UpdateAttribute
from flowactors.processors.bytes import ModifyBytes, SegmentContent
from flowactors.processors.compress import CompressContent
from flowactors.processors.detect_duplicate import DetectDuplicate
from flowactors.processors.files import FetchFile, GetFile, ListFile, PutFile
from flowactors.processors.flow_control import DistributeLoad, DuplicateFlowFile, LogMessage, RetryFlowFile
from flowactors.processors.monitor import MonitorActivity
from flowactors.processors.rate import ControlRate
from flowactors.processors.generate import GenerateFlowFile
from flowactors.processors.hash import HashContent
from flowactors.processors.http import HandleHttpRequest, HandleHttpResponse, InvokeHTTP, ListenHTTP
from flowactors.processors.json import (AttributesToCSV, AttributesToJSON, EvaluateJsonPath, FlattenJson,
                                        SplitJson, ValidateJson)
from flowactors.processors.jolt.processor import JoltTransformJSON
from flowactors.processors.merge import MergeContent
from flowactors.processors.messaging import ConsumeAMQP, ConsumeMQTT, PublishAMQP, PublishMQTT
from flowactors.processors.mime import IdentifyMimeType
from flowactors.processors.routing import RouteOnAttribute, RouteOnContent
from flowactors.processors.sql import ExecuteSQL, ExecuteSQLRecord
from flowactors.processors.sql import GenerateTableFetch, QueryDatabaseTable, QueryDatabaseTableRecord
from flowactors.processors.sql import ConvertJSONToSQL, PutDatabaseRecord, PutSQL
from flowactors.processors.execute_stateless import ExecuteStateless
from flowactors.processors.records import (ConvertRecord, LookupRecord, MergeRecord, PartitionRecord, QueryRecord,
                                           SplitRecord, UpdateRecord, ValidateRecord)
from flowactors.processors.text import ReplaceText, SplitText
from flowactors.processors.scripting import ExecuteScript, InvokeScriptedProcessor
from flowactors.processors.stream_command import ExecuteStreamCommand
from flowactors.processors.unpack import UnpackContent
from flowactors.processors.xml import EvaluateXPath, SplitXml
from flowactors.processors.xml_transform import TransformXml
from flowactors.processors.wait_notify import Notify, Wait
# ports and funnels are SDK components (as in NiFi, they are not processors); a definition may
# name them without a module too
from flowactors.sdk.ports import Funnel, InputPort, OutputPort

__all__ = [
    "CompressContent", "ConvertRecord", "EvaluateJsonPath", "ExecuteStateless", "ExtractText", "FetchFile",
    "Funnel", "GenerateFlowFile", "GetFile", "HashContent", "InputPort", "ListFile", "LogAttribute", "LookupRecord",
    "MergeContent", "MergeRecord", "OutputPort", "PartitionRecord", "PutFile", "QueryRecord", "ReplaceText",
    "RouteOnAttribute", "RouteOnContent", "SplitJson", "SplitRecord", "SplitText", "UnpackContent",
    "UpdateAttribute", "UpdateRecord", "ValidateRecord",
    "DetectDuplicate", "Notify", "Wait",
    "ExecuteScript", "ExecuteStreamCommand", "InvokeScriptedProcessor",
    "AttributesToCSV", "AttributesToJSON", "FlattenJson", "ValidateJson",
    "JoltTransformJSON",
    "ControlRate", "DistributeLoad", "DuplicateFlowFile", "LogMessage", "MonitorActivity", "RetryFlowFile",
    "ModifyBytes", "SegmentContent",
    "EvaluateXPath", "SplitXml", "TransformXml", "IdentifyMimeType",
    "HandleHttpRequest", "HandleHttpResponse", "InvokeHTTP", "ListenHTTP",
    "GenerateTableFetch", "QueryDatabaseTable", "QueryDatabaseTableRecord",
    "ConsumeAMQP", "ConsumeMQTT", "PublishAMQP", "PublishMQTT",
    "ExecuteSQL", "ExecuteSQLRecord",
    "ConvertJSONToSQL", "PutDatabaseRecord", "PutSQL",
]
