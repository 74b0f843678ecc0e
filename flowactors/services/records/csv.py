"""NiFi's CSVReader and CSVRecordSetWriter as controller services (docs/records/csv.md).

**Reading** streams through pyarrow (``csv_arrow``): windows of a few blocks of ``BATCH_BYTES``
parsed on pyarrow's threads where a byte search finds the last record's end, else pyarrow's
streaming reader, a few blocks read ahead. pyarrow converts the number and boolean fields
of the schema itself, where its reading is NiFi's (numbers trimmed, as Arrow casts text; true and
false in their usual casings; empty values and the Null String null); every other column is read
as text, then trimmed, unquoted and made null as NiFi's reader does (``Trim Fields``, ``Trim
Double Quote``, ``Null String``, empty values), and read as the schema's type, a column at a time
(``textual.text_as``). From a value pyarrow will not convert on (a boolean written ``tRUE`` or `` true``),
the rest of the content is read as text, so NiFi's rules decide. What pyarrow cannot parse (a
comment marker, a record with more or fewer values than the header, a multi-character separator)
is read by Python's ``csv`` module instead, from the record where pyarrow stopped, with the same
treatment after; a record Python cannot parse either (a quote never closed) is a
``MalformedRecordError`` naming it. ``Infer Schema`` reads the content twice, as NiFi does: the
schema is inferred from every record first (as text), then the records are read with it.

**Writing** is column by column too: each value as NiFi writes it in text (``textual.as_text``),
quoted as Apache Commons CSV's quote modes say, the columns joined in Arrow.
"""

from __future__ import annotations

import codecs
import csv
import io
from dataclasses import dataclass, replace
from typing import Any, BinaryIO, Collection, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from flowactors.sdk.processor import PropertyDescriptor
from flowactors.sdk.records.access import (HEADER_DERIVED, INFER, INHERIT, NIFI_NAMES, NIFI_VALUES, SCHEMA_CACHE,
                                           SCHEMA_INFERENCE_CACHE, SCHEMA_NAME, SCHEMA_PROPERTIES, SCHEMA_TEXT,
                                           SchemaCache, SchemaWriter, access_strategy, cached_inference, given_schema,
                                           write_strategy)
from flowactors.sdk.records.api import (BATCH_BYTES, BATCH_RECORDS, MalformedRecordError, RecordError, RecordReader,
                                        RecordReaderFactory, RecordSetWriter, SchemaMismatchError, WriteResult)
from flowactors.sdk.records.schema import avro_to_arrow, conform, merge_schemas, printable
from flowactors.sdk.services import ControllerService, ServiceContext
from flowactors.services.records.csv_formats import (CHARSET, CUSTOM, EXCEL, INFORMIX, INFORMIX_CSV, MYSQL,
                                                     NIFI_FORMAT_VALUES, NIFI_QUOTE_MODES, PREDEFINED, QUOTE_ALL,
                                                     QUOTE_MINIMAL, QUOTE_NON_NUMERIC, QUOTE_NONE, RFC_4180, TDF,
                                                     TRIM_FIELDS, CommentedLines, escape_problem)
from flowactors.services.records.csv_arrow import Parsing, Reading
from flowactors.services.records.textual import (FORMAT_PROPERTIES, TemporalFormats, as_text,
                                                 bool_property, renumbered, settle, single_char_problem, text_as,
                                                 text_type, unescape)

__all__ = ["CSVReader", "CSVRecordSetWriter"]

MIME_TYPE = "text/csv"
FORMATS = (CUSTOM, RFC_4180, EXCEL, TDF, MYSQL, INFORMIX, INFORMIX_CSV)
CSV_FORMAT = PropertyDescriptor("CSV Format", "The CSV dialect: one of Apache Commons CSV's, or Custom Format (the "
                                "properties marked so)", required=True, default=CUSTOM, allowable_values=FORMATS)


def _char(name: str, description: str, **kwargs: Any) -> PropertyDescriptor:
    """A one-character option of Custom Format, which may name FlowFile attributes (``${...}``)."""
    return PropertyDescriptor(name, f"{description}, with Java escapes (\\t, \\u0001); may name FlowFile attributes "
                              "(Custom Format only)", expression_language=True, **kwargs)


VALUE_SEPARATOR = _char("Value Separator", "The character between values", required=True, default=",",
                        validator=single_char_problem)
QUOTE_CHAR = _char("Quote Character", "The character values are quoted with", required=True, default='"',
                   validator=single_char_problem)
ESCAPE_CHAR = _char("Escape Character", "The character that makes the next one plain (empty: none)", required=True,
                    default="\\", validator=escape_problem)
COMMENT_MARKER = _char("Comment Marker", "A line starting with this character is a comment (reading)",
                       validator=single_char_problem)
FIRST_LINE_IS_HEADER = PropertyDescriptor(
    "Treat First Line as Header", "Whether the first line names the columns (always, with 'Infer Schema' and 'Use "
    "String Fields From Header')", required=True, default="false", allowable_values=("true", "false"))
IGNORE_HEADER = PropertyDescriptor(
    "Ignore CSV Header Column Names", "With a header and a given schema: whether columns are the schema's fields by "
    "position (true) or by the header's names (false)", default="false", allowable_values=("true", "false"))
NULL_STRING = PropertyDescriptor("Null String", "A value that stands for null (Custom Format only)")
RECORD_SEPARATOR = PropertyDescriptor("Record Separator", "What ends each record written, with Java escapes (\\n); "
                                      "reading takes any line end (Custom Format only)", required=True, default="\\n")
TRIM_DOUBLE_QUOTE = PropertyDescriptor(
    "Trim Double Quote", "Whether a value left in double quotes (a quote after spaces) loses them", required=True,
    default="true", allowable_values=("true", "false"))
ALLOW_DUPLICATE_HEADERS = PropertyDescriptor(
    "Allow Duplicate Header Names", "Whether a header may name a column twice (the first one is read)",
    default="true", allowable_values=("true", "false"))
INCLUDE_HEADER = PropertyDescriptor("Include Header Line", "Whether the column names are written first", required=True,
                                    default="true", allowable_values=("true", "false"))
QUOTE_MODE = PropertyDescriptor("Quote Mode", "Which values are quoted when written (Custom Format only)",
                                required=True, default=QUOTE_MINIMAL,
                                allowable_values=(QUOTE_ALL, QUOTE_MINIMAL, QUOTE_NON_NUMERIC, QUOTE_NONE))
TRAILING_DELIMITER = PropertyDescriptor("Include Trailing Delimiter", "Whether each record written ends with a "
                                        "separator (Custom Format only)", required=True, default="false",
                                        allowable_values=("true", "false"))

_NIFI_NAMES = {**NIFI_NAMES, "Skip Header Line": FIRST_LINE_IS_HEADER.name, "ignore-csv-header": IGNORE_HEADER.name,
               "csvutils-character-set": CHARSET.name,
               "csvutils-allow-duplicate-header-names": ALLOW_DUPLICATE_HEADERS.name,
               "Trim double quote": TRIM_DOUBLE_QUOTE.name}
_NIFI_VALUES = {**NIFI_VALUES, CSV_FORMAT.name: NIFI_FORMAT_VALUES, QUOTE_MODE.name: NIFI_QUOTE_MODES}
#: NiFi properties choosing among its Java parsers and writers: one implementation here, so the import leaves them out
_NIFI_IGNORED = ("CSV Parser", "csv-reader-csv-parser", "CSV Writer", "csv-writer")
#: Commons CSV's record separator and null string of the predefined formats, for writing
_WRITTEN = {RFC_4180: ("\r\n", None), EXCEL: ("\r\n", None), TDF: ("\r\n", None), MYSQL: ("\n", "\\N"),
            INFORMIX: ("\n", None), INFORMIX_CSV: ("\n", None)}


#: the byte order marks of the codecs that need one (big-endian, then little-endian)
_BYTE_ORDER_MARKS = {"utf-16": (codecs.BOM_UTF16_BE, codecs.BOM_UTF16_LE),
                     "utf-32": (codecs.BOM_UTF32_BE, codecs.BOM_UTF32_LE)}


@dataclass(frozen=True)
class _Dialect:
    """The CSV options for one content (properties may name FlowFile attributes)."""

    separator: str = ","
    quote: str | None = '"'
    escape: str | None = "\\"
    comment: str | None = None
    trim: bool = True
    null_string: str | None = None
    record_separator: str = "\n"
    quote_mode: str = QUOTE_MINIMAL
    trailing: bool = False
    charset: str = "UTF-8"

    @classmethod
    def of(cls, context: ServiceContext, attributes: Mapping[str, str]) -> "_Dialect":
        charset = context.property(CHARSET.name).evaluate(attributes=attributes) or "UTF-8"
        try:
            "".encode(charset)   # a codec of text: Python's lookup also knows 'hex' and 'rot13'
        except (LookupError, ValueError):   # a name from an attribute (the property's own is validated)
            raise RecordError(f"'Character Set' is '{printable(charset, 80)}', not a character set Python "
                              f"knows") from None
        name = context.property(CSV_FORMAT.name).raw or CUSTOM
        if name != CUSTOM:
            known = PREDEFINED[name]
            separator, null = _WRITTEN[name]
            return cls(known.separator, known.quote, known.escape, None, known.trim, null, separator,
                       QUOTE_ALL if name == MYSQL else QUOTE_MINIMAL, charset=charset)

        def char(name: str, default: str | None) -> str | None:
            value = unescape(context.property(name).evaluate(attributes=attributes) or "")
            return value if len(value) == 1 else default   # as NiFi: an attribute's bad value is ignored

        escape = context.property(ESCAPE_CHAR.name).evaluate(attributes=attributes)
        null = context.property(NULL_STRING.name).raw
        return cls(char(VALUE_SEPARATOR.name, ","), char(QUOTE_CHAR.name, '"'), None if not escape else char(
            ESCAPE_CHAR.name, "\\"), char(COMMENT_MARKER.name, None), bool_property(context, TRIM_FIELDS.name),
            None if null is None else unescape(null), unescape(context.property(RECORD_SEPARATOR.name).raw or "\\n"),
            context.property(QUOTE_MODE.name).raw or QUOTE_MINIMAL, bool_property(context, TRAILING_DELIMITER.name),
            charset)

    @property
    def ascii(self) -> bool:
        """Whether pyarrow can parse it: one-byte separator and quote, in an encoding where line
        ends, separators and quotes are those bytes (UTF-8, Latin-1...)."""
        try:
            return all(c.encode(self.charset) == c.encode("ascii") for c in (self.separator, self.quote or '"', "\n"))
        except (UnicodeError, LookupError):
            return False

    @property
    def arrow_encoding(self) -> str:
        """The encoding pyarrow is told: its own UTF-8 (which skips a byte order mark), else the character set."""
        return "utf8" if codecs.lookup(self.charset).name == "utf-8" else self.charset

    def encoding(self, head: bytes) -> str:
        """The Python codec of a content starting with ``head`` (4 bytes): UTF-8's skips a byte
        order mark; UTF-16 or UTF-32 without one is big-endian, as Java reads it (Python's
        codec refuses it)."""
        name = codecs.lookup(self.charset).name
        if name == "utf-8":
            return "utf-8-sig"
        if name in _BYTE_ORDER_MARKS and not head.startswith(_BYTE_ORDER_MARKS[name]):
            return f"{name}-be"
        return self.charset


# ---------------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class _Layout:
    """How a content's columns are named: by its header, or by position (no header, or one ignored)."""

    header: bool
    names: tuple[str, ...] | None   # the columns' names by position, when the header does not give them


class _Text:
    """The records of a content as columns, a batch at a time (module docstring): text, or the
    type pyarrow was asked to read a column as (``batches``' ``types``)."""

    def __init__(self, stream: BinaryIO, dialect: _Dialect, layout: _Layout, allow_duplicates: bool = True):
        self._stream, self._start = stream, stream.tell()
        self._dialect, self._layout = dialect, layout
        self._allow_duplicates = allow_duplicates
        #: the columns' names (known once ``batches`` or ``header`` started), and the records given
        self.names: list[str] = []
        self.records = 0
        #: whether the content read so far may hold a double quote (a value may be left in them)
        self.double_quoted = True

    def header(self) -> list[str]:
        """The column names, from the first record (the header)."""
        first = self._peek()
        return [] if first is None else self._named(first)

    def arrow_types(self, schema: pa.Schema) -> dict[str, pa.DataType]:
        """The fields of ``schema`` pyarrow reads as NiFi does (numbers, trimmed, and booleans in
        any case, as Arrow casts text), by name. Not where NiFi would compare a value trimmed with
        a Null String that is such a value itself (pyarrow compares it untrimmed)."""
        null, trimmed = self._dialect.null_string, self._dialect.trim
        found = {}
        for field in schema:
            t = field.type
            if not (pa.types.is_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t)
                    or pa.types.is_boolean(t)):
                continue
            if null is not None and trimmed:
                try:
                    pa.array([null.strip()]).cast(t)
                    continue
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    pass
            found[field.name] = t
        return found

    def batches(self, types: Mapping[str, pa.DataType] | None = None,
                fields: Collection[str] | None = None) -> Iterator[pa.RecordBatch]:
        """Batches of columns named as the header or the layout says (only those named in
        ``fields``, when given: pyarrow converts no other). A column ``types`` names (a number or
        a boolean) is read by pyarrow as that type, and null where empty or the Null String; every
        other column is text, each value trimmed and null as NiFi's reader makes it. From a value
        pyarrow does not read as its column's type on, every column is text (NiFi's rules then
        decide what it is)."""
        self.records = 0
        first = self._peek()
        if first is None:
            return
        self.names = self._named(first)
        width = len(first)
        kept = [i for i, name in enumerate(self.names[:width]) if fields is None or name in fields]
        names = [self.names[i] for i in kept]
        if self._dialect.comment is None and self._dialect.ascii:
            typed, mark = dict(types or {}), (self._start, self._layout.header, 0)
            while True:
                reading = Reading(self._stream, mark, self._parsing(width, typed, kept))
                try:
                    for batch in reading.batches(self.records - mark[2]):
                        self.records += batch.num_rows
                        self.double_quoted = reading.quotes.double_quoted
                        yield self._cleaned(pa.RecordBatch.from_arrays(batch.columns, names=names), parsed=True)
                    return
                except (pa.ArrowInvalid, UnicodeDecodeError):
                    if not typed:
                        break   # Python's csv goes on from the record pyarrow stopped at
                    typed, mark = {}, reading.mark   # the rest as text, from where the failed part began
        self.double_quoted = True
        for batch in self._python(self.records):
            yield self._cleaned(batch if fields is None else batch.select(names), parsed=False)

    def _rows(self, text: io.TextIOBase) -> tuple[Iterator[list[str]], CommentedLines]:
        d = self._dialect
        lines = CommentedLines(text, d.comment)
        rows = csv.reader(lines, delimiter=d.separator, quotechar=d.quote or '"', escapechar=d.escape,
                          quoting=csv.QUOTE_MINIMAL if d.quote else csv.QUOTE_NONE, doublequote=d.quote is not None,
                          strict=True)
        return (r for r in rows if r and r != [""]), lines

    def _text(self) -> io.TextIOWrapper:
        """The content as text, from its start (detach it after)."""
        self._stream.seek(self._start)
        head = self._stream.read(4)
        self._stream.seek(self._start)
        return io.TextIOWrapper(self._stream, encoding=self._dialect.encoding(head), newline="")

    def _peek(self) -> list[str] | None:
        """The content's first record (None when it has none); the stream is left at its start."""
        text = self._text()
        rows, lines = self._rows(text)
        try:
            return next(rows, None)
        except csv.Error as err:
            raise MalformedRecordError(f"not valid CSV: {err} (record 0, line {lines.line})", record=0) from None
        except UnicodeDecodeError as err:
            raise MalformedRecordError(f"the content is not {self._dialect.charset} text: {err.reason} (record 0, "
                                       f"line {lines.line + 1})", record=0) from None
        finally:
            text.detach()
            self._stream.seek(self._start)

    def _named(self, first: list[str]) -> list[str]:
        """The columns' names: the header's (its values trimmed as the values are), or the layout's."""
        names = list(self._layout.names or ())
        if self._layout.names is None:
            names = [h.strip() if self._dialect.trim else h for h in first]
        names += [f"unknown_field_index_{i}" for i in range(len(names), len(first))]
        seen: set[str] = set()
        for index, name in enumerate(names):
            if name in seen:
                if not self._allow_duplicates:
                    raise MalformedRecordError(f"the header names column '{name}' twice (Allow Duplicate Header "
                                               f"Names is false)", record=0)
                names[index] = f"unknown_field_index_{index}"
            seen.add(name)
        return names

    def _parsing(self, width: int, types: Mapping[str, pa.DataType], kept: list[int]) -> Parsing:
        """What pyarrow is told (``csv_arrow``): the columns ``types`` names converted by it, and
        only the columns at the positions ``kept`` given."""
        d = self._dialect
        internal = [f"c{i}" for i in range(width)]
        nulls = [""]
        if d.null_string is not None and (not d.trim or d.null_string == d.null_string.strip()):
            nulls.append(d.null_string)   # compared after trimming, as NiFi: one with outer spaces never matches
        return Parsing(
            pa_csv.ParseOptions(delimiter=d.separator, quote_char=d.quote or False, escape_char=d.escape or False,
                                double_quote=d.quote is not None, newlines_in_values=d.quote is not None,
                                ignore_empty_lines=True),
            pa_csv.ConvertOptions(column_types={i: types.get(n, pa.string()) for i, n in zip(internal, self.names)},
                                  include_columns=[internal[i] for i in kept],
                                  null_values=nulls, true_values=_TRUE, false_values=_FALSE, strings_can_be_null=True,
                                  quoted_strings_can_be_null=True),
            internal, BATCH_BYTES, d.arrow_encoding, (d.quote or "").encode(), (d.escape or "").encode())

    def _python(self, done: int) -> Iterator[pa.RecordBatch]:
        """The records after the first ``done`` ones, parsed by Python's csv."""
        text = self._text()
        rows, lines = self._rows(text)
        try:
            if self._layout.header:
                next(rows, None)
            pending: list[list[str]] = []
            for number, row in enumerate(rows):
                if number < done:
                    continue
                pending.append(row)
                if len(pending) >= BATCH_RECORDS:
                    yield self._columns(pending)
                    pending = []
            if pending:
                yield self._columns(pending)
        except csv.Error as err:
            raise MalformedRecordError(f"not valid CSV: {err} (record {self.records}, line {lines.line})",
                                       record=self.records) from None
        except UnicodeDecodeError as err:
            raise MalformedRecordError(f"the content is not {self._dialect.charset} text: {err.reason} "
                                       f"(record {self.records}, line {lines.line})", record=self.records) from None
        finally:
            text.detach()

    def _columns(self, rows: list[list[str]]) -> pa.RecordBatch:
        self.records += len(rows)
        columns = [pa.array([r[i] if i < len(r) else None for r in rows], pa.string()) for i in range(len(self.names))]
        return pa.RecordBatch.from_arrays(columns, names=self.names)

    def _cleaned(self, batch: pa.RecordBatch, parsed: bool) -> pa.RecordBatch:
        """Each text value trimmed (Trim Fields), and null when it is empty or the Null String.
        pyarrow (``parsed``) made the values that are so untrimmed null already."""
        d = self._dialect
        columns = []
        for column in batch.columns:
            if pa.types.is_string(column.type):
                trimmed = d.trim and _untrimmed(column)
                if trimmed:
                    column = pc.utf8_trim_whitespace(column)
                if trimmed or not parsed:
                    column = _nulls(column, d.null_string)
            columns.append(column)
        return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _nulls(column: pa.Array, null_string: str | None) -> pa.Array:
    """The column with its empty values, and those that are the Null String, null."""
    null = pc.equal(pc.binary_length(column), 0)
    if null_string is not None:
        null = pc.or_(null, pc.equal(column, null_string))
    return pc.if_else(null, pa.scalar(None, pa.string()), column) if pc.any(null).as_py() else column


def _untrimmed(column: pa.Array) -> bool:
    """Whether a value of a string column may start or end with white space: its first or last
    byte is a space or a control character, or not ASCII (Unicode white space). Half what
    trimming costs, which most columns then skip."""
    offsets, data = column.buffers()[1:3]
    if data is None:
        return False
    ends = np.frombuffer(offsets, np.int32, len(column) + 1, column.offset * 4)
    starts, ends = ends[:-1], ends[1:]
    filled = ends > starts
    if not filled.all():
        starts, ends = starts[filled], ends[filled]
    text = np.frombuffer(data, np.uint8)
    first, last = text[starts], text[ends - 1]
    return bool(((first <= 32) | (first >= 128) | (last <= 32) | (last >= 128)).any())


def _value_text(column: pa.Array, trim_quotes: bool, double_quoted: bool) -> pa.Array:
    """A column's text (``_cleaned``) as NiFi converts it: a value left in double quotes loses
    them (Trim Double Quote; ``double_quoted``: the content may hold one), and is null if then
    empty."""
    if trim_quotes and double_quoted and pc.any(pc.starts_with(column, '"')).as_py():
        quoted = pc.and_(pc.and_(pc.starts_with(column, '"'), pc.ends_with(column, '"')),
                         pc.greater(pc.utf8_length(column), 1))
        column = _nulls(pc.if_else(quoted, pc.utf8_slice_codeunits(column, 1, -1), column), None)
    return column


#: the usual casings of true and false (pyarrow matches each value against each: more cost more); NiFi reads
#: any casing, and a value in another casing sends the rest of the content through ``text_as``, which reads it
_TRUE, _FALSE = ["true", "True", "TRUE"], ["false", "False", "FALSE"]


class _CsvReader(RecordReader):
    """One content's records: its text columns read as the schema's fields."""

    def __init__(self, text: _Text, schema: pa.Schema | None, formats: TemporalFormats, strategy: str,
                 trim_quotes: bool):
        self._text, self._formats, self._trim_quotes = text, formats, trim_quotes
        self._kept: pa.RecordBatch | None = None   # the only batch of a content inferred in one
        if schema is not None:
            self._schema = schema
        elif strategy == HEADER_DERIVED:
            self._schema = self._header_strings()
        else:
            self._schema = self._infer()

    def schema(self) -> pa.Schema:
        return self._schema

    def _header_strings(self) -> pa.Schema:
        """Each column the header names as a STRING field."""
        return pa.schema([(n, pa.string()) for n in self._text.header() if not _unknown(n)])

    def _infer(self) -> pa.Schema:
        """The schema of the records' text (NiFi's rules, ``text_type``); of a header and no
        record, each header column a STRING field, as NiFi's inference makes them."""
        inferred = pa.schema([])
        seen = []
        for batch in self._text.batches():
            fields = [text_type(_value_text(c, True, self._text.double_quoted), self._formats, n)
                      for n, c in zip(batch.schema.names, batch.columns) if not _unknown(n)]
            inferred = merge_schemas(inferred, pa.schema(fields))
            seen = seen[:1] + [batch]
        if not seen:
            return self._header_strings()
        self._kept = seen[0] if len(seen) == 1 else None
        return settle(inferred)

    def batches(self) -> Iterator[pa.RecordBatch]:
        return self._read(self._schema, None)

    def projected_batches(self, names: Sequence[str]) -> Iterator[pa.RecordBatch]:
        schema = pa.schema([self._schema.field(name) for name in names], metadata=self._schema.metadata)
        return self._read(schema, set(names))   # the other columns are parsed, not converted

    def _read(self, schema: pa.Schema, fields: set[str] | None) -> Iterator[pa.RecordBatch]:
        if self._kept is not None:
            batches: Any = [self._kept]
        else:
            batches = self._text.batches(self._text.arrow_types(schema), fields)
        first = 0
        for raw in batches:
            for start in range(0, raw.num_rows, BATCH_RECORDS):
                part = raw.slice(start, BATCH_RECORDS)
                yield self._typed(part, first, schema)
                first += part.num_rows

    def _typed(self, raw: pa.RecordBatch, first: int, schema: pa.Schema) -> pa.RecordBatch:
        """The records of ``raw`` (text columns, or columns pyarrow typed) as ``schema``'s fields."""
        names = set(raw.schema.names)
        columns = []
        for field in schema:
            if field.name not in names:
                columns.append(pa.nulls(raw.num_rows, field.type))
                continue
            column = raw.column(field.name)
            if column.type == field.type and not pa.types.is_string(field.type):
                columns.append(column)   # read as its type by pyarrow (``_Text.arrow_types``)
                continue
            trim_quotes = self._trim_quotes or not pa.types.is_string(field.type)
            text = _value_text(column, trim_quotes, self._text.double_quoted)
            if text.type == field.type:
                columns.append(text)   # text: _cleaned made empty values null
                continue
            try:
                columns.append(text_as(text, field, self._formats))
            except SchemaMismatchError as err:
                raise SchemaMismatchError(renumbered(str(err), first)) from None
        try:
            return conform(pa.RecordBatch.from_arrays(columns, schema=schema), schema)
        except SchemaMismatchError as err:
            raise SchemaMismatchError(renumbered(str(err), first)) from None


def _unknown(name: str) -> bool:
    return name.startswith("unknown_field_index_")


class CSVReader(ControllerService, RecordReaderFactory):
    """Reads CSV as records; NiFi's CSVReader (docs/records/csv.md)."""

    description = "Reads CSV (any Apache Commons CSV format, or a custom one) as records"
    properties = (access_strategy((INFER, SCHEMA_NAME, SCHEMA_TEXT, HEADER_DERIVED), INFER), *SCHEMA_PROPERTIES,
                  SCHEMA_INFERENCE_CACHE, *FORMAT_PROPERTIES, CSV_FORMAT, VALUE_SEPARATOR, RECORD_SEPARATOR,
                  FIRST_LINE_IS_HEADER, IGNORE_HEADER, QUOTE_CHAR, ESCAPE_CHAR, COMMENT_MARKER, NULL_STRING,
                  TRIM_FIELDS, CHARSET, ALLOW_DUPLICATE_HEADERS, TRIM_DOUBLE_QUOTE)
    NIFI_PROPERTY_NAMES = _NIFI_NAMES
    NIFI_VALUES = _NIFI_VALUES
    NIFI_IGNORED = _NIFI_IGNORED

    def on_enabled(self, context: ServiceContext) -> None:
        self._context = context
        self._cache = SchemaCache(avro_to_arrow)
        self._formats = TemporalFormats.of(context)
        self._strategy = context.property("Schema Access Strategy").raw or INFER
        self._header = bool_property(context, FIRST_LINE_IS_HEADER.name) or self._strategy in (INFER, HEADER_DERIVED)
        self._ignore_header = bool_property(context, IGNORE_HEADER.name)
        self._trim_quotes = (context.property(TRIM_DOUBLE_QUOTE.name).raw or "true") == "true"
        self._duplicates = (context.property(ALLOW_DUPLICATE_HEADERS.name).raw or "true") == "true"

    def create_reader(self, attributes: Mapping[str, str], stream: BinaryIO, size: int) -> RecordReader:
        schema = given_schema(self._context, attributes, self._cache) or cached_inference(self._context, attributes)
        names = tuple(schema.names) if schema is not None and (not self._header or self._ignore_header) else None
        layout = _Layout(self._header, names)
        text = _Text(stream, _Dialect.of(self._context, attributes), layout, self._duplicates)
        return _CsvReader(text, schema, self._formats, self._strategy, self._trim_quotes)


# ---------------------------------------------------------------------------------- writing
class _CsvWriter(RecordSetWriter):
    """One content's CSV: the header line (when asked for, even without records), then the records."""

    def __init__(self, out: BinaryIO, schema: pa.Schema, dialect: _Dialect, formats: TemporalFormats, header: bool,
                 attributes: dict[str, str]):
        self._out, self._schema, self._dialect, self._formats = out, schema, dialect, formats
        self._header, self._attributes = header, attributes
        self._count = 0

    def write_batch(self, batch: pa.RecordBatch) -> None:
        if batch.schema != self._schema:
            batch = conform(batch, self._schema)
        self._write_header()
        if not batch.num_rows:
            return
        columns = [self._quoted(as_text(c, self._formats), _numeric(f.type), i == 0)
                   for i, (f, c) in enumerate(zip(self._schema, batch.columns))]
        self._write_lines(columns, batch.num_rows)
        self._count += batch.num_rows

    def finish(self) -> WriteResult:
        self._write_header()
        return WriteResult(self._count, dict(self._attributes))

    def _write_header(self) -> None:
        if self._header:
            self._header = False
            names = pa.array(self._schema.names, pa.string())
            columns = [self._quoted(names.slice(i, 1), False, i == 0) for i in range(len(names))]
            self._write_lines(columns, 1)

    def _write_lines(self, columns: list[pa.Array], rows: int) -> None:
        d = self._dialect
        if columns:
            lines = pc.binary_join_element_wise(*columns, d.separator)
        else:
            lines = pa.array([""] * rows, pa.string())
        end = (d.separator if d.trailing else "") + d.record_separator
        text = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, rows], pa.int32()), lines), end)[0].as_py() + end
        self._out.write(text.encode(d.charset))

    def _quoted(self, text: pa.Array, numeric: bool, first: bool) -> pa.Array:
        """Values quoted (or escaped) as Commons CSV prints them in the quote mode; null as the Null String."""
        d = self._dialect
        if d.trim:
            text = pc.utf8_trim_whitespace(text)
        mode = d.quote_mode if d.quote is not None else QUOTE_NONE
        if mode == QUOTE_NONE:
            written = _escaped(text, d) if d.escape is not None else text
        else:
            if mode == QUOTE_ALL:
                quote = pc.is_valid(text)
            elif mode == QUOTE_NON_NUMERIC:
                quote = pc.is_valid(text) if not numeric else pc.equal(text, "\0")
            else:
                quote = pc.match_substring_regex(text, _minimal_pattern(d))
                if first:
                    quote = pc.or_(quote, pc.equal(text, ""))
            doubled = pc.replace_substring(text, d.quote, d.quote * 2)
            if d.escape is not None and d.escape != d.quote:
                doubled = pc.replace_substring(doubled, d.escape, d.escape * 2)
            wrapped = pc.binary_join_element_wise(d.quote, doubled, d.quote, "")
            written = pc.if_else(pc.fill_null(quote, False), wrapped, text)
        if d.null_string is None:
            return pc.fill_null(written, "")
        null = d.quote + d.null_string + d.quote if mode == QUOTE_ALL else d.null_string
        return pc.fill_null(written, null)


def _minimal_pattern(d: _Dialect) -> str:
    """Commons CSV's MINIMAL rule: a value that starts with a character up to '#', holds a line
    end, the quote, the separator or the escape, or ends with a space or a control character."""
    special = "".join(_re_char(c) for c in {d.separator, d.quote or "", d.escape or ""} if c)
    return rf"^[\x00-#]|[\r\n{special}]|[\x00- ]$"


def _re_char(c: str) -> str:
    return "\\" + c if c in "\\]^-[" else c


def _escaped(text: pa.Array, d: _Dialect) -> pa.Array:
    """Quote mode NONE: the separator, quote, escape and line ends each after the escape."""
    escape = d.escape or ""
    text = pc.replace_substring(text, escape, escape * 2)
    for char, written in ((d.separator, d.separator), (d.quote, d.quote), ("\r", "r"), ("\n", "n")):
        if char and char != escape:
            text = pc.replace_substring(text, char, escape + written)
    return text


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


class CSVRecordSetWriter(ControllerService, SchemaWriter):
    """Writes records as CSV; NiFi's CSVRecordSetWriter (docs/records/csv.md)."""

    description = "Writes records as CSV (any Apache Commons CSV format, or a custom one)"
    properties = (write_strategy(), access_strategy((INHERIT, SCHEMA_NAME, SCHEMA_TEXT), INHERIT), *SCHEMA_PROPERTIES,
                  SCHEMA_CACHE, *FORMAT_PROPERTIES, CSV_FORMAT, VALUE_SEPARATOR, INCLUDE_HEADER, QUOTE_CHAR,
                  ESCAPE_CHAR, COMMENT_MARKER, NULL_STRING, TRIM_FIELDS, QUOTE_MODE, RECORD_SEPARATOR,
                  TRAILING_DELIMITER, CHARSET)
    NIFI_PROPERTY_NAMES = _NIFI_NAMES
    NIFI_VALUES = _NIFI_VALUES
    NIFI_IGNORED = _NIFI_IGNORED
    MIME_TYPE = MIME_TYPE

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        if values.get(CSV_FORMAT.name, CUSTOM) == CUSTOM and values.get(QUOTE_MODE.name) == QUOTE_NONE \
                and values.get(ESCAPE_CHAR.name, "\\") == "":
            return [f"'{QUOTE_MODE.name}' '{QUOTE_NONE}' needs an '{ESCAPE_CHAR.name}' to write special characters "
                    "with"]
        return []

    def on_enabled(self, context: ServiceContext) -> None:
        self._context = context
        self._schemas = SchemaCache(avro_to_arrow)
        self._formats = TemporalFormats.of(context)

    def create_writer(self, schema: pa.Schema, out: BinaryIO, attributes: Mapping[str, str]) -> RecordSetWriter:
        result = self.result_attributes(schema)
        dialect = _Dialect.of(self._context, attributes)
        if dialect.quote is None and dialect.escape is None:   # MySQL: no quote, backslash escapes
            dialect = replace(dialect, escape="\\")
        return _CsvWriter(out, schema, dialect, self._formats, bool_property(self._context, INCLUDE_HEADER.name),
                          result)
