"""NiFi's XMLReader and XMLRecordSetWriter as controller services (docs/records/xml.md).

**Reading** streams with lxml's ``iterparse``: each record element, once its end tag is read,
becomes a Python value as NiFi's XML record source makes it (an element with child elements or,
when parsed, attributes is a record of them, a repeated child an array, other elements their
trimmed text, the text beside child elements the ``Field Name for Content`` field), and is
dropped from the tree, so a document larger than memory is read in bounded memory. A batch of at
most ``BATCH_RECORDS`` records (or about ``BATCH_BYTES`` of input) is then fitted to the schema
and converted column by column (``textual.rows_to_batch``). ``Infer Schema`` reads the content
twice, as NiFi does: every record counts for the schema, whose types come from the text as
NiFi's inference reads it.

**Writing** makes each value text column by column first (numbers, dates in their formats), then
writes the elements record by record with NiFi's null suppression and array wrapping.
"""

from __future__ import annotations

from typing import Any, BinaryIO, Iterator, Mapping
from xml.sax.saxutils import escape

import pyarrow as pa
from lxml import etree

from flowactors.sdk.processor import PropertyDescriptor
from flowactors.sdk.records.access import (INFER, INHERIT, NIFI_NAMES, NIFI_VALUES, SCHEMA_CACHE, SCHEMA_NAME,
                                           SCHEMA_PROPERTIES, SCHEMA_TEXT, SchemaCache, SchemaWriter, access_strategy,
                                           given_schema, schema_name, with_name, write_strategy)
from flowactors.sdk.records.api import (BATCH_BYTES, BATCH_RECORDS, MalformedRecordError, RecordError, RecordReader,
                                        RecordReaderFactory, RecordSetWriter, WriteResult)
from flowactors.sdk.records.schema import avro_to_arrow, conform, merge_schemas, printable
from flowactors.sdk.services import ControllerService, ServiceContext
from flowactors.services.records.textual import (FORMAT_PROPERTIES, NEVER_SUPPRESS, SUPPRESS_MISSING,
                                                 SUPPRESS_NULLS, SUPPRESS_VALUES, TemporalFormats, as_text,
                                                 bool_property, infer_rows, rows_to_batch, settle)

__all__ = ["XMLReader", "XMLRecordSetWriter"]

MIME_TYPE = "application/xml"
ATTRIBUTE_ARRAY = "${xml.stream.is.array}"
RECORD_FORMAT = PropertyDescriptor(
    "Expect Records as Array", "Whether the root element wraps the records (true) or is the one record (false); "
    f"'{ATTRIBUTE_ARRAY}' reads the FlowFile's attribute", required=True, default="false",
    allowable_values=("false", "true", ATTRIBUTE_ARRAY), expression_language=True)
ATTRIBUTE_PREFIX = PropertyDescriptor("Attribute Prefix", "Put before the names of fields made of XML attributes",
                                      expression_language=True)
CONTENT_FIELD = PropertyDescriptor(
    "Field Name for Content", "The field that holds an element's text when the element is a record (it has "
    "attributes or child elements)", expression_language=True)
PARSE_ATTRIBUTES = PropertyDescriptor("Parse XML Attributes", "Whether XML attributes become fields",
                                      default="true", allowable_values=("true", "false"))

NO_WRAPPING, AS_WRAPPER, FOR_ELEMENTS = "No Wrapping", "Use Property as Wrapper", "Use Property for Elements"
PRETTY_PRINT = PropertyDescriptor("Pretty Print XML", "Whether the XML is indented", required=True, default="false",
                                  allowable_values=("true", "false"))
OMIT_DECLARATION = PropertyDescriptor("Omit XML Declaration", "Whether the <?xml ... ?> declaration is left out",
                                      required=True, default="false", allowable_values=("true", "false"))
ROOT_TAG = PropertyDescriptor("Name of Root Tag", "The element wrapping the records; needed to write more than one")
RECORD_TAG = PropertyDescriptor("Name of Record Tag", "The element of each record; by default the schema's name")
ARRAY_WRAPPING = PropertyDescriptor(
    "Wrap Elements of Arrays", "How an array's elements are written: one element each named as the field (No "
    "Wrapping), those wrapped in an 'Array Tag Name' element, or named 'Array Tag Name' inside one named as the "
    "field", required=True, default=NO_WRAPPING, allowable_values=(AS_WRAPPER, FOR_ELEMENTS, NO_WRAPPING))
ARRAY_TAG = PropertyDescriptor("Array Tag Name", "The tag 'Wrap Elements of Arrays' uses")
CHARACTER_SET = PropertyDescriptor("Character Set", "The character set the XML is written in", required=True,
                                   default="UTF-8")

#: how much of the content the parser is fed at a time
_READ = 1 << 16
#: the key an element's text is kept under (when no content field is named), for a scalar field
_TEXT = "\0text"


# ---------------------------------------------------------------------------------- reading
def _local(name: Any) -> str:
    """An element's or attribute's name without its namespace (lxml's ``{uri}name``); a name lxml
    took that is not a QName (``:n``, a namespace error libxml2 only warns of) stays as it is."""
    return name.rpartition("}")[2] if name.startswith("{") else name


class _Elements:
    """What an element is, as NiFi's XML record source sees it (module docstring)."""

    def __init__(self, attributes: bool, prefix: str | None, content: str | None):
        self._attributes, self._prefix, self._content = attributes, prefix or "", content

    def value(self, element: Any) -> Any:
        """A record (dict) for an element with child elements or parsed attributes, else its text
        (None when blank)."""
        fields: dict[str, Any] = {}
        if self._attributes:
            for name, text in element.attrib.items():
                fields[self._prefix + _local(name)] = text
        parts = [element.text] if element.text and element.text.strip() else []
        for child in element:
            if child.tail and child.tail.strip():
                parts.append(child.tail)
            if not isinstance(child.tag, str):   # comments and processing instructions
                continue
            name, value = _local(child.tag), self.value(child)
            if name not in fields:
                fields[name] = value
            elif isinstance(fields[name], _Repeated):
                fields[name].append(value)
            else:
                fields[name] = _Repeated([fields[name], value])
        text = "".join(parts).strip()
        if not fields:
            return text or None
        if text:
            fields[self._content or _TEXT] = text
        return fields


class _Repeated(list):
    """The values of a child element found more than once: an array."""


def _fit(value: Any, data_type: pa.DataType, content: str | None) -> Any:
    """An element's value made the shape ``data_type`` wants, as NiFi's reader reads an element
    for a field: a record from text (into the content field), text from a record (its content),
    an array from one value; a record's internal text key dropped."""
    if value is None:
        return None
    if pa.types.is_list(data_type):
        values = value if isinstance(value, list) else [value]
        return [_fit(v, data_type.value_type, content) for v in values]
    if isinstance(value, _Repeated):   # several elements for a field that is not an array: the last
        value = value[-1]
    if pa.types.is_struct(data_type):
        if not isinstance(value, dict):
            return {content: value} if content else {}
        return {f.name: _fit(value.get(f.name), f.type, content) for f in data_type}
    if pa.types.is_map(data_type):
        return {k: _fit(v, data_type.item_type, content) for k, v in value.items() if k != _TEXT} \
            if isinstance(value, dict) else None
    if isinstance(value, dict):
        return value.get(content or _TEXT, value.get(_TEXT))
    return value


def _plain(value: Any) -> Any:
    """An element's value for inference: arrays as lists, no internal text key."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != _TEXT}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _listed(rows: list[dict]) -> list[dict]:
    """Records where a field is an array (a repeated element) in one of them, that field made an
    array of one in the others (and so on inside records), as XML cannot tell them apart."""
    arrays = {k for r in rows for k, v in r.items() if isinstance(v, list)}
    nested = {k for r in rows for k, v in r.items() if isinstance(v, dict)}
    if not arrays and not nested:
        return rows
    inner = {k: _listed([v for r in rows for v in _items(r.get(k)) if isinstance(v, dict)]) for k in nested | arrays}
    fixed = {k: iter(v) for k, v in inner.items()}
    result = []
    for row in rows:
        out = {}
        for key, value in row.items():
            if key in arrays and value is not None and not isinstance(value, list):
                value = [value]
            if key in fixed:
                value = [next(fixed[key]) if isinstance(v, dict) else v for v in value] if isinstance(value, list) \
                    else next(fixed[key]) if isinstance(value, dict) else value
            out[key] = value
        result.append(out)
    return result


def _items(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _lifted(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """Record type ``a`` with each field that ``b`` has as an array (and ``a`` not) made an array."""
    others = {f.name: f.type for f in b}
    fields = []
    for field in a:
        other, t = others.get(field.name), field.type
        if other is not None and pa.types.is_list(other) and not pa.types.is_list(t) and not pa.types.is_null(t):
            t = pa.list_(t)
        if other is not None and pa.types.is_struct(t):
            inner = other.value_type if pa.types.is_list(other) else other
            t = _lifted(t, inner) if pa.types.is_struct(inner) else t
        elif other is not None and pa.types.is_list(t) and pa.types.is_struct(t.value_type):
            inner = other.value_type if pa.types.is_list(other) else other
            t = pa.list_(_lifted(t.value_type, inner)) if pa.types.is_struct(inner) else t
        fields.append(field.with_type(t))
    return pa.struct(fields)


class _XmlReader(RecordReader):
    """One content's records (module docstring)."""

    def __init__(self, stream: BinaryIO, schema: pa.Schema | None, array: bool, elements: _Elements,
                 content: str | None, formats: TemporalFormats):
        self._stream, self._start = stream, stream.tell()
        self._array, self._elements, self._content, self._formats = array, elements, content, formats
        self._schema = schema if schema is not None else self._infer()

    def schema(self) -> pa.Schema:
        return self._schema

    def _infer(self) -> pa.Schema:
        inferred, names = pa.struct([]), set()
        for names_seen, values in self._records():
            rows = _listed([_plain(v) if isinstance(v, dict) else {} for v in values])
            part = pa.struct(list(infer_rows(rows, self._formats, True)))
            inferred, part = _lifted(inferred, part), _lifted(part, inferred)
            inferred = pa.struct(list(merge_schemas(pa.schema(list(inferred)), pa.schema(list(part)))))
            names |= names_seen
        schema = settle(pa.schema(list(inferred)))
        return with_name(schema, names.pop()) if len(names) == 1 else schema

    def batches(self) -> Iterator[pa.RecordBatch]:
        first = 0
        struct = pa.struct(list(self._schema))
        for _, values in self._records():
            for start in range(0, len(values), BATCH_RECORDS):
                rows = [_fit(v, struct, self._content) for v in values[start:start + BATCH_RECORDS]]
                yield rows_to_batch(rows, self._schema, self._formats, first)
                first += len(rows)

    def _records(self) -> Iterator[tuple[set[str], list[Any]]]:
        """Batches of records: the names of their elements, and their values."""
        self._stream.seek(self._start)
        parser = etree.XMLPullParser(events=("start", "end"), resolve_entities=False, huge_tree=True,
                                     remove_comments=True, remove_pis=True)
        record_depth = 1 if self._array else 0
        depth, done, read, given, names, values = 0, 0, 0, 0, set(), []
        while True:
            data = self._stream.read(_READ)
            try:
                if data:
                    parser.feed(data)
                else:
                    parser.close()
            except etree.XMLSyntaxError as err:   # the records read before it are given first
                self._take(parser, record_depth, depth, names, values)
                if values:
                    yield names, values
                raise _malformed(err, done + len(values), read) from None
            depth = self._take(parser, record_depth, depth, names, values)
            read += len(data)
            if values and (not data or len(values) >= BATCH_RECORDS or read - given >= BATCH_BYTES):
                yield names, values
                given, done, names, values = read, done + len(values), set(), []
            if not data:
                return

    def _take(self, parser: Any, record_depth: int, depth: int, names: set[str], values: list) -> int:
        """The records whose end tags the parser read, added to ``names`` and ``values`` (and
        dropped from its tree); the depth the parser is at."""
        for event, element in parser.read_events():
            if event == "start":
                depth += 1
                continue
            depth -= 1
            if depth != record_depth:
                continue
            names.add(_local(element.tag))
            values.append(self._elements.value(element))
            element.clear()
            while element.getprevious() is not None:
                del element.getparent()[0]
        return depth


def _malformed(err: etree.XMLSyntaxError, record: int, offset: int) -> MalformedRecordError:
    line, column = err.position if err.position else (None, None)
    where = f"line {line}, column {column}" if line else f"near byte {offset}"
    reason = printable((str(err.msg or err).strip().splitlines() or [""])[0].split(", line")[0], 200)
    if "Document is empty" in reason or "no element found" in reason:
        reason = "the content has no XML element"
    return MalformedRecordError(f"not valid XML: {reason} ({where}; record {record})", record=record)
class XMLReader(ControllerService, RecordReaderFactory):
    """Reads XML as records; NiFi's XMLReader (docs/records/xml.md)."""

    description = "Reads XML: one record, or the records wrapped in a root element"
    properties = (access_strategy((INFER, SCHEMA_NAME, SCHEMA_TEXT), INFER), *SCHEMA_PROPERTIES, PARSE_ATTRIBUTES,
                  RECORD_FORMAT, ATTRIBUTE_PREFIX, CONTENT_FIELD, *FORMAT_PROPERTIES)
    NIFI_PROPERTY_NAMES = {**NIFI_NAMES, "record_format": RECORD_FORMAT.name, "attribute_prefix": ATTRIBUTE_PREFIX.name,
                           "content_field_name": CONTENT_FIELD.name, "parse_xml_attributes": PARSE_ATTRIBUTES.name}
    NIFI_VALUES = NIFI_VALUES

    def on_enabled(self, context: ServiceContext) -> None:
        self._context = context
        self._cache = SchemaCache(avro_to_arrow)
        self._formats = TemporalFormats.of(context)
        self._attributes = (context.property(PARSE_ATTRIBUTES.name).raw or "true") == "true"

    def create_reader(self, attributes: Mapping[str, str], stream: BinaryIO, size: int) -> RecordReader:
        schema = given_schema(self._context, attributes, self._cache)
        array = (self._context.property(RECORD_FORMAT.name).evaluate(attributes=attributes) or "").strip().lower()
        if array not in ("true", "false"):
            raise MalformedRecordError(f"'{RECORD_FORMAT.name}' is {array!r} for this FlowFile, which is neither "
                                       "'true' nor 'false' (the attribute 'xml.stream.is.array' says which)")
        prefix = (self._context.property(ATTRIBUTE_PREFIX.name).evaluate(attributes=attributes) or "").strip() or None
        content = (self._context.property(CONTENT_FIELD.name).evaluate(attributes=attributes) or "").strip() or None
        return _XmlReader(stream, schema, array == "true", _Elements(self._attributes, prefix, content), content,
                          self._formats)


# ---------------------------------------------------------------------------------- writing
_STRIPPED = str.maketrans("", "", "/<>!&'\"")


def _tag(name: str) -> str:
    """A field name as a tag, without the characters NiFi strips from tags."""
    return name.translate(_STRIPPED)


def _texts(array: pa.Array, formats: TemporalFormats) -> pa.Array:
    """``array`` with every value inside made its text (records, arrays and maps keep their shape)."""
    t = array.type
    if pa.types.is_struct(t):
        children = [_texts(array.field(i), formats) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(children, names=[f.name for f in t],
                                          mask=array.is_null() if array.null_count else None)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        offsets = array.offsets
        if offsets[0].as_py():
            offsets = pa.compute.subtract(offsets, offsets[0])
        return pa.ListArray.from_arrays(offsets, _texts(array.flatten(), formats),
                                        mask=array.is_null() if array.null_count else None)
    if pa.types.is_map(t):
        items = _texts(array.items, formats)
        return pa.MapArray.from_arrays(array.offsets, array.keys.cast(pa.string()), items,
                                       mask=array.is_null() if array.null_count else None)
    return as_text(array, formats)


class _ElementWriter:
    """Writes records' values (text already) as elements, with NiFi's null suppression and array
    wrapping; ``pretty`` indents four spaces a level, as NiFi's indenting writer."""

    def __init__(self, suppress: str, wrapping: str, array_tag: str | None, pretty: bool):
        self._suppress, self._wrapping, self._array_tag, self.pretty = suppress, wrapping, array_tag, pretty

    def _keeps_null(self, present: bool) -> bool:
        return self._suppress == NEVER_SUPPRESS or (self._suppress == SUPPRESS_MISSING and present)

    def _element(self, name: str, inner: str, depth: int, container: bool) -> str:
        if not self.pretty:
            return f"<{name}>{inner}</{name}>"
        indent = "\n" + "    " * depth
        closing = indent if container and inner else ""
        return f"{indent}<{name}>{inner}{closing}</{name}>"

    def record(self, name: str, value: dict, given: pa.DataType | None, depth: int) -> str | None:
        """A record's element, or None when nothing of it is written (every field suppressed)."""
        present = {f.name for f in given} if given is not None and pa.types.is_struct(given) else None
        parts = []
        for field, item in value.items():
            inner = given.field(field).type if present and field in present else None
            written = self.field(field, item, present is None or field in present, inner, depth + 1)
            if written is not None:
                parts.append(written)
        return self._element(_tag(name), "".join(parts), depth, True) if parts else None

    def field(self, name: str, value: Any, present: bool, given: pa.DataType | None, depth: int) -> str | None:
        if value is None:
            return self._element(_tag(name), "", depth, False) if self._keeps_null(present) else None
        if given is not None and pa.types.is_map(given):   # a map's entries, each an element named as its key
            value = dict(value)
            given = pa.struct([pa.field(k, given.item_type) for k in value])
        if isinstance(value, dict):
            written = self.record(name, value, given, depth)
            if written is None and self._keeps_null(True):
                return self._element(_tag(name), "", depth, False)
            return written
        if isinstance(value, list):
            return self._array(name, value, getattr(given, "value_type", None), depth)
        return self._element(_tag(name), escape(value), depth, False)

    def _array(self, name: str, values: list, given: pa.DataType | None, depth: int) -> str | None:
        wrapper = None
        element = name
        if self._wrapping == AS_WRAPPER:
            wrapper = self._array_tag
        elif self._wrapping == FOR_ELEMENTS:
            wrapper, element = name, self._array_tag or name
        inner_depth = depth + 1 if wrapper else depth
        parts = []
        for value in values:
            written = self.field(element, value, True, given, inner_depth)
            if written is not None:
                parts.append(written)
        if wrapper is None:
            return "".join(parts) or None
        if parts or self._keeps_null(True):
            return self._element(_tag(wrapper), "".join(parts), depth, bool(parts))
        return None


class _XmlWriter(RecordSetWriter):
    """One content's XML: the declaration, the root element (when named) and each record's element."""

    def __init__(self, out: BinaryIO, schema: pa.Schema, record_tag: str, root_tag: str | None, declaration: bool,
                 elements: _ElementWriter, formats: TemporalFormats, charset: str, attributes: dict[str, str]):
        self._out, self._schema, self._record_tag, self._root_tag = out, schema, record_tag, root_tag
        self._elements, self._formats, self._charset, self._attributes = elements, formats, charset, attributes
        self._pretty = elements.pretty
        self._pending = '<?xml version="1.0" ?>' if declaration else ""
        self._started = False
        self._written = 0
        self._count = 0

    def _start(self) -> None:
        if not self._started:
            self._started = True
            self._write(self._pending + (f"<{_tag(self._root_tag)}>" if self._root_tag else ""))

    def _write(self, text: str) -> None:
        self._out.write(text.encode(self._charset))

    def write_batch(self, batch: pa.RecordBatch) -> None:
        given = batch.schema
        if given != self._schema:
            batch = conform(batch, self._schema)
        self._start()
        struct_type = pa.struct(list(given))
        columns = [_texts(c, self._formats) for c in batch.columns]
        rows = pa.StructArray.from_arrays(columns, names=batch.schema.names).to_pylist() if columns \
            else [{}] * batch.num_rows
        depth = 1 if self._root_tag else 0
        for row in rows:
            written = self._elements.record(self._record_tag, row, struct_type, depth)
            if written is None:
                continue
            if self._written and not self._root_tag:
                raise RecordError(f"the writer attempts to write more than one record although '{ROOT_TAG.name}' is "
                                  "not set: set it to write several records into one FlowFile")
            self._write(written if depth else written.lstrip("\n"))
            self._written += 1
        self._count += batch.num_rows

    def finish(self) -> WriteResult:
        self._start()
        if self._root_tag:
            closing = f"</{_tag(self._root_tag)}>"
            self._write(("\n" + closing) if self._pretty and self._written else closing)
        return WriteResult(self._count, dict(self._attributes))


class XMLRecordSetWriter(ControllerService, SchemaWriter):
    """Writes records as XML; NiFi's XMLRecordSetWriter (docs/records/xml.md)."""

    description = "Writes records as XML elements, wrapped in a root element"
    properties = (write_strategy(), access_strategy((INHERIT, SCHEMA_NAME, SCHEMA_TEXT), INHERIT), *SCHEMA_PROPERTIES,
                  SCHEMA_CACHE, *FORMAT_PROPERTIES, SUPPRESS_NULLS, PRETTY_PRINT, OMIT_DECLARATION, ROOT_TAG,
                  RECORD_TAG, ARRAY_WRAPPING, ARRAY_TAG, CHARACTER_SET)
    NIFI_PROPERTY_NAMES = {**NIFI_NAMES, "suppress_nulls": SUPPRESS_NULLS.name, "pretty_print_xml": PRETTY_PRINT.name,
                           "omit_xml_declaration": OMIT_DECLARATION.name, "root_tag_name": ROOT_TAG.name,
                           "record_tag_name": RECORD_TAG.name, "array_wrapping": ARRAY_WRAPPING.name,
                           "array_tag_name": ARRAY_TAG.name}
    NIFI_VALUES = {**NIFI_VALUES, SUPPRESS_NULLS.name: SUPPRESS_VALUES,
                   ARRAY_WRAPPING.name: {"use-property-as-wrapper": AS_WRAPPER,
                                         "use-property-for-elements": FOR_ELEMENTS, "no-wrapping": NO_WRAPPING}}
    MIME_TYPE = MIME_TYPE

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        if values.get(ARRAY_WRAPPING.name, NO_WRAPPING) != NO_WRAPPING and not values.get(ARRAY_TAG.name):
            return [f"'{ARRAY_TAG.name}' must be set when '{ARRAY_WRAPPING.name}' is "
                    f"'{values[ARRAY_WRAPPING.name]}'"]
        return []

    def on_enabled(self, context: ServiceContext) -> None:
        self._context = context
        self._schemas = SchemaCache(avro_to_arrow)
        self._formats = TemporalFormats.of(context)
        self._elements = _ElementWriter(context.property(SUPPRESS_NULLS.name).raw or NEVER_SUPPRESS,
                                          context.property(ARRAY_WRAPPING.name).raw or NO_WRAPPING,
                                          context.property(ARRAY_TAG.name).raw,
                                          bool_property(context, PRETTY_PRINT.name))

    def create_writer(self, schema: pa.Schema, out: BinaryIO, attributes: Mapping[str, str]) -> RecordSetWriter:
        record_tag = self._context.property(RECORD_TAG.name).raw or schema_name(schema)
        if not record_tag:
            raise RecordError(f"'{RECORD_TAG.name}' is not set and the schema written has no name to use instead")
        result = self.result_attributes(schema)
        return _XmlWriter(out, schema, record_tag.rpartition(".")[2], self._context.property(ROOT_TAG.name).raw,
                          not bool_property(self._context, OMIT_DECLARATION.name), self._elements, self._formats,
                          self._context.property(CHARACTER_SET.name).raw or "UTF-8", result)
