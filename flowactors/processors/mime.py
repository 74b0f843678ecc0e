"""IdentifyMimeType: mime.type, mime.extension and mime.charset from a content's leading bytes."""

from __future__ import annotations

import os
from typing import Mapping

from flowactors.processors._common import boolean_property, read_prefix
from flowactors.processors.mime_table import (PREFIX, PRESET, MimeConfigError, MimeTable, charset, parse_config)
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor
from flowactors.sdk.relationships import SUCCESS

PRESET_STRATEGY, REPLACE, MERGE = "Preset", "Replace", "Merge"
_PRESET_TYPES = parse_config(PRESET)


def custom_config_text(value: str) -> str:
    """The Tika MIME configuration a Custom MIME Configuration value gives: a file's text when it
    names a file, the value itself when it is XML (starts with ``<``); ``MimeConfigError`` else."""
    if value.lstrip().startswith("<"):
        return value
    if os.path.isfile(value):
        try:
            with open(value, encoding="utf-8") as stream:
                return stream.read()
        except (OSError, UnicodeDecodeError) as err:
            raise MimeConfigError(f"cannot read {value!r}: {err}") from None
    raise MimeConfigError(f"{value[:200]!r} is neither a readable file nor a Tika MIME configuration (XML starting "
                          f"with '<'); a URL is not supported")


def config_strategy(values: Mapping[str, str]) -> str:
    """Config Strategy as configured; not configured at all but with a Custom MIME Configuration,
    Replace: what NiFi's migration makes of a flow from before NiFi 2 (``config-file`` or
    ``config-body``, no strategy, a custom table that replaced the preset)."""
    strategy = values.get("Config Strategy")
    if strategy is None:
        return REPLACE if values.get("Custom MIME Configuration") else PRESET_STRATEGY
    return strategy


def mime_table(strategy: str, custom: str | None) -> MimeTable:
    """The table a Config Strategy uses: the preset, the custom configuration alone (Replace) or the
    custom one then the preset (Merge: a type in both gets the custom globs first)."""
    if strategy == PRESET_STRATEGY:
        return MimeTable(_PRESET_TYPES)
    types = parse_config(custom_config_text(custom or ""))
    return MimeTable(types + _PRESET_TYPES if strategy == MERGE else types)


class IdentifyMimeType(Processor):
    """Sets mime.type from the content's first 64 KB (and its filename, with Use Filename In
    Detection), mime.extension (the type's usual extension, "" when none is known) and, for text
    (``text/*``), mime.charset; every FlowFile goes to success.

    Detection follows Tika's, on a table of flowactors' own in Tika's MIME configuration format
    (``mime_table``: why not a library there): the magic match of highest priority, else
    text/plain for text and application/octet-stream for anything else; then the filename's type
    when it specializes that (a ``.csv`` text is text/csv). Config Strategy Replace uses only the
    Custom MIME Configuration (a file's path or the XML itself), Merge puts it before the preset;
    a Custom MIME Configuration without any Config Strategy (a flow from before NiFi 2) is Replace.
    Of Tika's configuration, ``<mime-type>``, ``<glob pattern>``, ``<sub-class-of>`` and
    ``<magic priority>`` with nested ``<match type="string">`` (an offset or a range ``n:m``,
    ``\\xNN``, octal escapes or a ``0x`` hexadecimal value) are read; other match types, masks and
    URLs are refused when the flow is validated, and root-XML, alias and text-pattern rules
    ignored. The charset is the byte order mark's, ISO-8859-1 for ASCII (as Tika says), UTF-8 for
    valid UTF-8, ISO-8859-1 otherwise (Tika's statistical detector can name others).
    Provenance: ATTRIBUTES_MODIFIED (from the session).
    """

    description = "Identifies the MIME type of the content (mime.type, mime.extension, mime.charset)"
    properties = (
        boolean_property("Use Filename In Detection", True, "Whether the filename attribute helps the detection"),
        PropertyDescriptor("Config Strategy", "Preset: the built-in types; Replace: the custom configuration only; "
                           "Merge: the custom configuration before the built-in types", required=True,
                           default=PRESET_STRATEGY, allowable_values=(PRESET_STRATEGY, REPLACE, MERGE)),
        PropertyDescriptor("Custom MIME Configuration", "A Tika MIME types configuration: a file's path or the XML "
                           "itself (with Config Strategy Replace or Merge)"),
    )
    relationships = (SUCCESS,)
    NIFI_TYPE = "org.apache.nifi.processors.standard.IdentifyMimeType"
    NIFI_PROPERTY_NAMES = {"use-filename-in-detection": "Use Filename In Detection",
                           "config-strategy": "Config Strategy", "config-file": "Custom MIME Configuration",
                           "config-body": "Custom MIME Configuration"}

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        strategy = config_strategy(values)
        custom = values.get("Custom MIME Configuration")
        if strategy == PRESET_STRATEGY:
            if custom:
                return ["Custom MIME Configuration is set but Config Strategy Preset ignores it: set Config Strategy "
                        "to Replace or Merge, or remove it"]
            return []
        if not custom:
            return [f"Custom MIME Configuration must be set with Config Strategy {strategy}"]
        try:
            mime_table(strategy, custom)
        except MimeConfigError as err:
            return [f"property 'Custom MIME Configuration': {err}"]
        return []

    def on_scheduled(self, context: ProcessContext) -> None:
        self._table = mime_table(config_strategy(context.values), context.property("Custom MIME Configuration").raw)
        self._use_filename = context.property("Use Filename In Detection").as_bool()

    def on_trigger(self, context: ProcessContext, session) -> None:
        for flowfile in session.get_batch():
            with session.read(flowfile) as stream:
                data = read_prefix(stream, PREFIX)
            name = self._table.detect(data, flowfile.attributes.get("filename") if self._use_filename else None)
            attributes = {"mime.type": name, "mime.extension": self._table.extension(name)}
            if name.startswith("text/"):
                attributes["mime.charset"] = charset(data)
            session.transfer(session.put_all_attributes(flowfile, attributes), SUCCESS)
