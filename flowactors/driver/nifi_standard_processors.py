"""NiFi's standard processors that flowactors has, and how their configuration maps.

A NiFi flow definition names a processor by its Java class and lists every property with its
value, defaults included. For each class flowactors runs, ``STANDARD_PROCESSORS`` says which
flowactors processor it becomes and how its properties carry over:

* first, as NiFi does when it loads a flow, ``migrated`` renames the properties NiFi itself
  renames (each processor's ``migrateProperties``: the names of NiFi 1.x and of older 2.x
  versions, ``Regular Expression`` -> ``Search Value``) to NiFi's current name, and drops those
  it removes (old name -> None), so a NiFi 1.x export loads as NiFi 2 loads it;
* a property flowactors has under the same name (most: flowactors follows NiFi's names) carries
  over as it is; ``renamed`` maps the ones spelt differently;
* ``values`` maps allowable values spelt differently;
* ``fixed`` lists NiFi properties flowactors has no such property for: the import accepts the
  value flowactors behaves as (``None``: the property unset, or empty as NiFi takes ""; ``ANY``:
  tuning that changes nothing here, such as a listing's timestamp precision) and reports any
  other value as not supported;
* ``derived`` sets flowactors properties from the NiFi configuration where NiFi's behaviour is
  fixed and flowactors' is configurable (CryptographicHashContent's attribute name).

Every property the table does not know is reported too (unless the processor takes dynamic
properties), so an import never silently changes what a flow does.

A processor may also declare its row itself, in class attributes (a new processor family does,
so that it lives in its own module): ``NIFI_TYPE`` (NiFi's Java class), ``NIFI_PROPERTY_NAMES``
(``migrated`` and ``renamed`` in one), ``NIFI_VALUES`` (``values``), ``NIFI_FIXED`` (``fixed`` with None or a value) and
``NIFI_IGNORED`` (NiFi properties accepted whatever their value: ``fixed`` with ``ANY``) and
``NIFI_FORMER_TYPES`` (the Java classes older NiFi versions named it by). Every
processor ``flowactors.processors`` exports with a ``NIFI_TYPE`` joins the table; a row written
here for the same class wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from flowactors import processors as p
from flowactors.sdk.processor import Processor

#: a ``fixed`` value that accepts anything
ANY = object()


@dataclass(frozen=True)
class StandardProcessor:
    processor: type[Processor]
    renamed: Mapping[str, str] = field(default_factory=dict)
    values: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    fixed: Mapping[str, object] = field(default_factory=dict)
    derived: Callable[[Mapping[str, str]], dict[str, str]] | None = None
    migrated: Mapping[str, str | None] = field(default_factory=dict)


_STANDARD = "org.apache.nifi.processors.standard."
#: what every record processor's NiFi export names its reader and writer (NiFi 2 renames them)
_RECORDS = {"record-reader": "Record Reader", "record-writer": "Record Writer",
            "include-zero-record-flowfiles": "Include Zero Record FlowFiles"}
#: ListFile's (AbstractListProcessor's and ListedEntityTracker's) renames and removal
_LISTING = {"Distributed Cache Service": None, "target-system-timestamp-precision": "Target System Timestamp Precision",
            "listing-strategy": "Listing Strategy", "record-writer": "Record Writer",
            "et-state-cache": "Entity Tracking State Cache", "et-time-window": "Entity Tracking Time Window",
            "et-initial-listing-target": "Entity Tracking Initial Listing Target",
            "et-node-identifier": "Entity Tracking Node Identifier"}

def declared(processor: type[Processor]) -> StandardProcessor:
    """The row a processor declares in its class attributes (the module docstring)."""
    fixed: dict[str, object] = {name: ANY for name in getattr(processor, "NIFI_IGNORED", ())}
    return StandardProcessor(processor, renamed=getattr(processor, "NIFI_PROPERTY_NAMES", {}),
                             values=getattr(processor, "NIFI_VALUES", {}),
                             fixed={**fixed, **getattr(processor, "NIFI_FIXED", {})})


#: the rows of the processors that declare their NiFi class
_DECLARED = {java_type: declared(kind) for kind in (getattr(p, name) for name in p.__all__)
             if isinstance(kind, type) and issubclass(kind, Processor) and getattr(kind, "NIFI_TYPE", None)
             for java_type in (kind.NIFI_TYPE, *getattr(kind, "NIFI_FORMER_TYPES", ()))}

STANDARD_PROCESSORS: dict[str, StandardProcessor] = {**_DECLARED, **{
    _STANDARD + "GenerateFlowFile": StandardProcessor(
        p.GenerateFlowFile,
        migrated={"generate-ff-custom-text": "Custom Text", "mime-type": "Mime Type", "character-set": "Character Set"}),
    "org.apache.nifi.processors.attributes.UpdateAttribute": StandardProcessor(
        p.UpdateAttribute,
        migrated={"canonical-value-lookup-cache-size": "Cache Value Lookup Cache Size"},
        fixed={"Store State": "Do not store state", "Stateful Variables Initial Value": None,
               "Cache Value Lookup Cache Size": ANY}),
    _STANDARD + "RouteOnAttribute": StandardProcessor(p.RouteOnAttribute),
    _STANDARD + "LogAttribute": StandardProcessor(
        p.LogAttribute,
        migrated={"attributes-to-log-regex": "Attributes to Log Regular Expression",
                  "attributes-to-ignore-regex": "Attributes to Ignore Regular Expression",
                  "character-set": "Character Set", "Log prefix": "Log Prefix"},
        renamed={"Attributes to Log Regular Expression": "Attributes to Log by Regular Expression",
                 "Attributes to Ignore Regular Expression": "Attributes to Ignore by Regular Expression",
                 "Log Prefix": "Log prefix"},
        fixed={"Output Format": "Line per Attribute", "Log FlowFile Properties": ANY}),
    _STANDARD + "PutFile": StandardProcessor(
        p.PutFile, fixed={"Maximum File Count": None, "Last Modified Time": None, "Owner": None, "Group": None}),
    _STANDARD + "GetFile": StandardProcessor(p.GetFile, fixed={"Polling Interval": ANY}),
    _STANDARD + "ListFile": StandardProcessor(
        p.ListFile,
        migrated={**_LISTING, "track-performance": "Track Performance",
                  "max-performance-metrics": "Maximum Number of Files to Track",
                  "max-operation-time": "Max Disk Operation Time", "max-listing-time": "Max Directory Listing Time"},
        values={"Listing Strategy": {"timestamps": "Tracking Timestamps", "entities": "Tracking Entities"}},
        fixed={"Input Directory Location": "Local", "Include File Attributes": ANY, "Record Writer": None,
               "Target System Timestamp Precision": ANY, "Track Performance": ANY,
               "Maximum Number of Files to Track": ANY, "Max Disk Operation Time": ANY,
               "Max Directory Listing Time": ANY, "Entity Tracking State Cache": None,
               "Entity Tracking Time Window": ANY, "Entity Tracking Initial Listing Target": ANY,
               "Entity Tracking Node Identifier": ANY}),
    _STANDARD + "FetchFile": StandardProcessor(
        p.FetchFile,
        migrated={"Log level when file not found": "File not Found Log Level",
                  "Log level when permission denied": "Permission Denied Log Level"},
        fixed={"Move Destination Directory": None, "Move Conflict Strategy": ANY,
                            "File not Found Log Level": ANY, "Permission Denied Log Level": ANY}),
    _STANDARD + "ExtractText": StandardProcessor(
        p.ExtractText,
        migrated={"extract-text-enable-repeating-capture-group": "Enable Repeating Capture Group",
                  "Enable repeating capture group": "Enable Repeating Capture Group",
                  "extract-text-enable-named-groups": "Enable Named Groups",
                  "Enable named group support": "Enable Named Groups"},
        renamed={"Enable Repeating Capture Group": "Enable repeating capture group"},
        fixed={name: "false" for name in (
            "Enable Canonical Equivalence", "Permit Whitespace and Comments in Pattern",
            "Enable Literal Parsing of the Pattern", "Enable Unicode-aware Case Folding",
            "Enable Unicode Predefined Character Classes", "Enable Unix Lines Mode", "Enable Named Groups")}),
    _STANDARD + "RouteOnContent": StandardProcessor(p.RouteOnContent),
    _STANDARD + "SplitText": StandardProcessor(
        p.SplitText, fixed={"Maximum Fragment Size": None, "Header Line Marker Characters": None}),
    _STANDARD + "ReplaceText": StandardProcessor(
        p.ReplaceText, migrated={"Regular Expression": "Search Value"},
        fixed={"Text to Prepend": None, "Text to Append": None,
                              "Line-by-Line Evaluation Mode": "All"}),
    _STANDARD + "MergeContent": StandardProcessor(
        p.MergeContent,
        migrated={"Maximum number of Bins": "Maximum Number of Bins",
                  "mergecontent-metadata-strategy": "Metadata Strategy", "Header File": "Header",
                  "Footer File": "Footer", "Demarcator File": "Demarcator"},
        renamed={"Maximum Number of Bins": "Maximum number of Bins"},
        fixed={"Metadata Strategy": ANY, "Bin Termination Check": None,
                               "FlowFile Insertion Strategy": ANY}),
    _STANDARD + "UnpackContent": StandardProcessor(
        p.UnpackContent, migrated={"allow-stored-entries-wdd": "Allow Stored Entries With Data Descriptor"},
        fixed={"Filename Character Set": ANY, "Password": None,
                                "Allow Stored Entries With Data Descriptor": "false"}),
    _STANDARD + "CompressContent": StandardProcessor(p.CompressContent),
    _STANDARD + "CryptographicHashContent": StandardProcessor(
        p.HashContent, migrated={"fail_when_empty": "Fail When Content Empty", "hash_algorithm": "Hash Algorithm"},
        renamed={"Fail When Content Empty": "Fail if the content is empty"},
        values={"Hash Algorithm": {"BLAKE2-512": "BLAKE2b"}},
        # NiFi names the attribute after the algorithm: content_SHA-256
        derived=lambda values: {"Hash Attribute Name": f"content_{values.get('Hash Algorithm', 'SHA-256')}"}),
    _STANDARD + "ConvertRecord": StandardProcessor(p.ConvertRecord, renamed=_RECORDS),
    _STANDARD + "QueryRecord": StandardProcessor(
        p.QueryRecord, renamed=_RECORDS | {"cache-schema": "Cache Schema"},
        fixed={"dbf-default-precision": ANY, "dbf-default-scale": ANY, "Default Decimal Precision": ANY,
               "Default Decimal Scale": ANY}),
    _STANDARD + "SplitRecord": StandardProcessor(p.SplitRecord, renamed=_RECORDS),
    _STANDARD + "ValidateRecord": StandardProcessor(
        p.ValidateRecord,
        renamed=_RECORDS | {"invalid-record-writer": "Record Writer for Invalid Records",
                            "schema-access-strategy": "Schema Access Strategy", "schema-registry": "Schema Registry",
                            "schema-name": "Schema Name", "schema-version": "Schema Version",
                            "schema-branch": "Schema Branch", "schema-text": "Schema Text",
                            "allow-extra-fields": "Allow Extra Fields", "strict-type-checking": "Strict Type Checking",
                            "coerce-types": "Force Types From Reader Schema",
                            "validation-details-attribute-name": "Validation Details Attribute Name",
                            "maximum-validation-details-length": "Maximum Validation Details Length"},
        values={"Schema Access Strategy": {"reader-schema": "Use Reader's Schema", "schema-name-property":
                                           "Use 'Schema Name' Property", "schema-text-property": "Use 'Schema Text' Property"}}),
    _STANDARD + "UpdateRecord": StandardProcessor(
        p.UpdateRecord, migrated=_RECORDS | {"replacement-value-strategy": "Replacement Value Strategy"},
        # its dynamic properties are record paths: NiFi's zero-record switch must not become one
        fixed={"Include Zero Record FlowFiles": "true"},
        values={"Replacement Value Strategy": {"literal-value": "Literal Value",
                                               "record-path-value": "Record Path Value"}}),
    _STANDARD + "PartitionRecord": StandardProcessor(p.PartitionRecord, renamed=_RECORDS),
    _STANDARD + "MergeRecord": StandardProcessor(
        p.MergeRecord,
        renamed=_RECORDS | {"merge-strategy": "Merge Strategy", "correlation-attribute-name": "Correlation Attribute Name",
                            "min-records": "Minimum Number of Records", "max-records": "Maximum Number of Records",
                            "min-bin-size": "Minimum Bin Size", "max-bin-size": "Maximum Bin Size",
                            "max-bin-age": "Max Bin Age", "max-bin-count": "Maximum Number of Bins",
                            "max.bin.count": "Maximum Number of Bins"}),
}}
