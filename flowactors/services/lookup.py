"""The lookup services: values by key, for LookupRecord and NiFi 2 Python processors (NiFi's
``SimpleKeyValueLookupService``, ``SimpleCsvFileLookupService`` and ``CSVRecordLookupService``).

Each takes the coordinate ``key`` (``LookupService.required_keys``); a key that is not text is
looked up as NiFi's records write it as text (``true``, ``1.5``). A missing or blank key finds
nothing.

**The CSV services** read the ``CSV File`` when enabled: its first record names the columns, each
other record is one entry, keyed by its ``Lookup Key Column``. The simple one's value is the
``Lookup Value Column``; the record one's is the whole row as a record (a dict of every other
column, as text). The file is parsed as the ``CSV Format`` says: one of NiFi's predefined formats,
or ``Custom Format`` with ``Value Separator``, ``Quote Character``, ``Escape Character``,
``Comment Marker`` and ``Trim Fields``. A file that is missing, cannot be decoded in its
``Character Set``, lacks a named column, has a record too short to hold one, an empty key, or a
key twice while ``Ignore Duplicates`` is false, stops the service from enabling (the flow does not
start) with the file, the line and what is wrong. Afterwards, as NiFi, the file is looked at again
at most every ``RELOAD_CHECK_SECONDS`` (30 s) when a lookup comes: when its modification time or
size changed it is read again; if that fails the lookup fails (its FlowFile goes to failure) and
the table read before stays in use.
"""

from __future__ import annotations

import csv
import logging
import os
import threading
import time
from typing import Any, Iterator, Mapping

from flowactors.sdk.processor import PropertyDescriptor, validators
from flowactors.sdk.record_path.conversions import java_text
from flowactors.sdk.records import RecordLookupService
from flowactors.sdk.records.schema import printable
from flowactors.sdk.services import ControllerService, LookupService, ServiceContext, ServiceEnableError, StringLookupService
from flowactors.services.records.csv_formats import (CHARSET, CUSTOM, DEFAULT, EXCEL, INFORMIX, INFORMIX_CSV, MYSQL,
                                                     NIFI_FORMAT_VALUES, NIFI_QUOTE_MODES, PREDEFINED, QUOTE_ALL,
                                                     QUOTE_MINIMAL, QUOTE_NON_NUMERIC, QUOTE_NONE, RFC4180_COMPAT,
                                                     RFC_4180, TDF, TRIM_FIELDS, CommentedLines, CsvDialect,
                                                     escape_problem)
from flowactors.services.records.textual import char_property, single_char_problem, unescape

log = logging.getLogger(__name__)

#: the coordinate every lookup here takes
KEY = "key"


class LookupFailureError(RuntimeError):
    """A lookup could not be answered (the CSV file changed and cannot be read again)."""


def key_text(coordinates: Mapping[str, Any]) -> str | None:
    """The ``key`` coordinate as text (None when missing or blank)."""
    text = java_text(coordinates.get(KEY)) if coordinates else None
    return text if text is not None and text.strip() else None


class SimpleKeyValueLookupService(ControllerService, StringLookupService):
    """Values by key, each a dynamic property: its name the key, its value the value."""

    description = "Looks values up by key among its dynamic properties (the property name is the key)"
    dynamic_properties = True
    NIFI_PROPERTY_NAMES: dict[str, str] = {}
    NIFI_VALUES: dict[str, dict[str, str]] = {}

    def __init__(self) -> None:
        self._values: dict[str, str] = {}

    def on_enabled(self, context: ServiceContext) -> None:
        self._values = {name: context.property(name).evaluate() or "" for name in context.dynamic_properties}

    def on_disabled(self, context: ServiceContext) -> None:
        self._values = {}

    def lookup(self, coordinates: Mapping[str, Any]) -> str | None:
        key = key_text(coordinates)
        return None if key is None else self._values.get(key)


# ---------------------------------------------------------------------------------- CSV files
def _custom(name: str, description: str, **kwargs: Any) -> PropertyDescriptor:
    return PropertyDescriptor(name, f"{description} (Custom Format only)", **kwargs)


CSV_FILE = PropertyDescriptor("CSV File", "The CSV file the keys and values are read from; its first line names "
                              "the columns", required=True, expression_language=True, validator=validators.NON_EMPTY)
CSV_FORMAT = PropertyDescriptor("CSV Format", "The format of the file: a predefined one, or Custom Format (the "
                                "properties below)", required=True, default=DEFAULT,
                                allowable_values=(CUSTOM, RFC_4180, EXCEL, TDF, MYSQL, INFORMIX, INFORMIX_CSV,
                                                  DEFAULT, RFC4180_COMPAT))
KEY_COLUMN = PropertyDescriptor("Lookup Key Column", "The column whose value is looked up (the lookup's key)",
                                required=True, expression_language=True, validator=validators.NON_EMPTY)
IGNORE_DUPLICATES = PropertyDescriptor(
    "Ignore Duplicates", "Whether a key found twice is allowed (the later record wins); false: the service does not "
    "enable", required=True, default="true", allowable_values=("true", "false"))
VALUE_SEPARATOR = _custom("Value Separator", "The character between values", required=True, default=",",
                          validator=single_char_problem)
QUOTE_CHAR = _custom("Quote Character", "The character values are quoted with", required=True, default='"',
                     validator=single_char_problem)
QUOTE_MODE = _custom("Quote Mode", "How values are quoted when written: reading takes any quoting, so this "
                     "changes nothing here (kept as NiFi has it)", required=True, default=QUOTE_MINIMAL,
                     allowable_values=(QUOTE_ALL, QUOTE_MINIMAL, QUOTE_NON_NUMERIC, QUOTE_NONE))
COMMENT_MARKER = _custom("Comment Marker", "A line starting with this character is a comment",
                         validator=single_char_problem)
ESCAPE_CHAR = _custom("Escape Character", "The character that makes the next one plain (empty: none)",
                      required=True, default="\\", validator=escape_problem)

_CSV_NIFI_NAMES = {"csv-file": "CSV File", "csv-format": "CSV Format", "lookup-key-column": "Lookup Key Column",
                   "ignore-duplicates": "Ignore Duplicates"}
_CSV_NIFI_VALUES = {"CSV Format": {**NIFI_FORMAT_VALUES, "default": DEFAULT, "RFC4180": RFC4180_COMPAT},
                    "Quote Mode": NIFI_QUOTE_MODES}


class _CsvFileLookup(ControllerService):
    """What the CSV file services share: the properties, reading the file into a table of entries
    by key, and reading it again when it changed (see the module docstring). A subclass says
    which columns it needs (``_columns``) and what a record's entry is (``_entry``)."""

    #: how often, at most, a lookup looks whether the file changed (seconds; NiFi's 30 s)
    RELOAD_CHECK_SECONDS = 30.0

    def __init__(self) -> None:
        self._table: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._checked = 0.0
        self._stamp: tuple[int, int] | None = None

    def on_enabled(self, context: ServiceContext) -> None:
        self._path = context.property("CSV File").evaluate() or ""
        self._charset = context.property("Character Set").evaluate() or "UTF-8"
        self._key_column = context.property("Lookup Key Column").evaluate() or ""
        self._ignore_duplicates = context.property("Ignore Duplicates").as_bool()
        self._dialect = self._dialect_of(context)
        self._configure(context)
        self._stamp = self._file_stamp()
        self._table = self._load()
        self._checked = time.monotonic()

    def on_disabled(self, context: ServiceContext) -> None:
        self._table = None

    def _configure(self, context: ServiceContext) -> None:
        """Read the subclass's own properties (before the file is read)."""

    @staticmethod
    def _dialect_of(context: ServiceContext) -> CsvDialect:
        name = context.property("CSV Format").raw or DEFAULT
        if name != CUSTOM:
            return PREDEFINED[name]
        escape = context.property("Escape Character").raw
        return CsvDialect(unescape(context.property("Value Separator").raw or ","),
                          char_property(context.property("Quote Character").raw),
                          char_property(escape) if escape else None,
                          char_property(context.property("Comment Marker").raw),
                          context.property("Trim Fields").as_bool())

    @property
    def is_loaded(self) -> bool:
        """Whether a table is held (enabled, and not disabled since)."""
        return self._table is not None

    # ------------------------------------------------------------------ the file
    def _file_stamp(self) -> tuple[int, int]:
        try:
            status = os.stat(self._path)
        except OSError as err:
            raise ServiceEnableError(f"cannot read CSV File '{self._path}': {err.strerror or err}") from None
        return status.st_mtime_ns, status.st_size

    def _load(self) -> dict[str, Any]:
        """The file's entries by key (ServiceEnableError saying where the file is wrong)."""
        where = f"CSV File '{self._path}'"
        try:
            with open(self._path, "rb") as file:
                text = file.read().decode(self._charset)
        except OSError as err:
            raise ServiceEnableError(f"cannot read {where}: {err.strerror or err}") from None
        except UnicodeDecodeError as err:
            raise ServiceEnableError(f"{where} is not {self._charset} text: byte {err.start} "
                                     f"({err.object[err.start:err.start + 1]!r}) cannot be decoded") from None
        lines = CommentedLines(text.splitlines(keepends=True), self._dialect.comment)
        records = (row for row in self._dialect.reader(lines) if row)
        try:
            header = [self._trimmed(name) for name in next(records)]
        except StopIteration:
            raise ServiceEnableError(f"{where} is empty: its first line must name the columns") from None
        except csv.Error as err:
            raise ServiceEnableError(f"{where}, line {lines.line}: {err}") from None
        positions = {name: index for index, name in reversed(list(enumerate(header)))}
        for column in self._columns():
            if column not in positions:
                raise ServiceEnableError(f"{where} has no column '{printable(column, 80)}' (its columns: "
                                         f"{_listed(header)})")
        return self._entries(records, lines, header, positions, where)

    def _entries(self, records: Iterator[list[str]], lines: CommentedLines, header: list[str],
                 positions: dict[str, int], where: str) -> dict[str, Any]:
        table: dict[str, Any] = {}
        key_at = positions[self._key_column]
        needed = max(positions[c] for c in self._columns())
        try:
            for row in records:
                if len(row) <= needed:
                    raise ServiceEnableError(f"{where}, line {lines.line}: the record has {len(row)} values, but "
                                             f"column '{printable(header[needed], 80)}' is value {needed + 1}")
                values = [self._trimmed(v) for v in row]
                key = values[key_at]
                if not key.strip():
                    raise ServiceEnableError(f"{where}, line {lines.line}: the lookup key "
                                             f"(column '{printable(self._key_column, 80)}') is empty")
                if key in table:
                    if not self._ignore_duplicates:
                        raise ServiceEnableError(f"{where}, line {lines.line}: the lookup key '{printable(key, 80)}' "
                                                 "is there twice (set Ignore Duplicates to keep the last)")
                    log.warning("%s, line %d: duplicate lookup key '%s'; the last one is kept", where, lines.line,
                                printable(key, 80))
                table[key] = self._entry(values, header, positions)
        except csv.Error as err:
            raise ServiceEnableError(f"{where}, line {lines.line}: {err}") from None
        if not table:
            log.warning("%s holds no entries", where)
        return table

    def _trimmed(self, value: str) -> str:
        return value.strip(" \t\r\n\f\v\0") if self._dialect.trim else value

    def _columns(self) -> list[str]:
        """The columns the file must have."""
        return [self._key_column]

    def _entry(self, values: list[str], header: list[str], positions: dict[str, int]) -> Any:
        raise NotImplementedError

    # ------------------------------------------------------------------ lookups
    def _current(self) -> dict[str, Any]:
        """The table, read again first when the file changed (looked at most every
        ``RELOAD_CHECK_SECONDS``); a failed reading raises and keeps the table read before."""
        table = self._table
        if table is None:
            raise RuntimeError(f"{type(self).__name__} is not enabled")
        now = time.monotonic()
        if now - self._checked < self.RELOAD_CHECK_SECONDS:
            return table
        with self._lock:
            if now - self._checked >= self.RELOAD_CHECK_SECONDS:
                self._checked = now
                try:
                    stamp = self._file_stamp()
                except ServiceEnableError as err:
                    raise LookupFailureError(str(err)) from None
                if stamp != self._stamp:
                    self._stamp = stamp   # as NiFi's watcher: a file that fails is tried again when it changes again
                    try:
                        self._table = self._load()
                    except ServiceEnableError as err:
                        raise LookupFailureError(f"the CSV File changed and could not be read again "
                                                 f"(the entries read before stay in use): {err}") from None
                    log.info("CSV File '%s' changed: read again (%d entries)", self._path, len(self._table))
        return self._table

    def lookup(self, coordinates: Mapping[str, Any]) -> Any:
        key = key_text(coordinates)
        return None if key is None else self._current().get(key)


def _listed(names: list[str], most: int = 20) -> str:
    """A header's column names for a message: each printable, the first ``most`` of them."""
    shown = [printable(name, 40) for name in names[:most]]
    return ", ".join(shown + (["..."] if len(names) > most else []))


class SimpleCsvFileLookupService(_CsvFileLookup, StringLookupService):
    """Strings by key from a CSV file: the Lookup Value Column of the record whose Lookup Key Column
    is the key."""

    description = "Looks values up by key in a CSV file (one column the key, another the value)"
    properties = (CSV_FILE, CSV_FORMAT, CHARSET, KEY_COLUMN, IGNORE_DUPLICATES, VALUE_SEPARATOR, QUOTE_CHAR,
                  QUOTE_MODE, COMMENT_MARKER, ESCAPE_CHAR, TRIM_FIELDS,
                  PropertyDescriptor("Lookup Value Column", "The column whose value a lookup gives", required=True,
                                     expression_language=True, validator=validators.NON_EMPTY))
    NIFI_PROPERTY_NAMES = {**_CSV_NIFI_NAMES, "lookup-value-column": "Lookup Value Column"}
    NIFI_VALUES = _CSV_NIFI_VALUES

    def _configure(self, context: ServiceContext) -> None:
        self._value_column = context.property("Lookup Value Column").evaluate() or ""

    def _columns(self) -> list[str]:
        return [self._key_column, self._value_column]

    def _entry(self, values: list[str], header: list[str], positions: dict[str, int]) -> str:
        return values[positions[self._value_column]]


class CSVRecordLookupService(_CsvFileLookup, LookupService, RecordLookupService):
    """Records by key from a CSV file: the whole record whose Lookup Key Column is the key, as a
    dict of every other column (text; a column the record is too short for is None)."""

    description = "Looks records up by key in a CSV file (the row, without its key column)"
    properties = (CSV_FILE, CSV_FORMAT, CHARSET, KEY_COLUMN, IGNORE_DUPLICATES, VALUE_SEPARATOR, QUOTE_CHAR,
                  QUOTE_MODE, COMMENT_MARKER, ESCAPE_CHAR, TRIM_FIELDS)
    #: NiFi names this service's format property 'csv-format' (the simple service's is 'CSV Format')
    NIFI_PROPERTY_NAMES = _CSV_NIFI_NAMES
    NIFI_VALUES = _CSV_NIFI_VALUES

    def _entry(self, values: list[str], header: list[str], positions: dict[str, int]) -> dict[str, str | None]:
        return {name: values[index] if index < len(values) else None
                for index, name in enumerate(header) if name != self._key_column}
