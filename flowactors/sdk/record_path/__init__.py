"""NiFi's RecordPath language: find and change fields of one record.

A path is compiled once (``compile_path``, cached; every mistake is a ``RecordPathError`` with its
position) and evaluated per record (``RecordPath.evaluate(record, schema, context)``), giving the
``FieldValue``s it selects, each of which knows its value, its field's name and type, its parent,
and can be set (``update``) or removed (``remove``, ``remove_fields``) in place.

A record is a Python dict (nested dicts for records, lists for arrays, dicts for maps), with its
Arrow schema when known (``shapes``: the schema's types, and what tells a record from a map).
``lexer`` and ``parser`` hold the syntax, ``steps`` the path steps, ``filters`` the comparisons and
filter functions, ``functions`` the standalone functions, ``conversions`` how values are read as
text, numbers and dates. docs/record-path.md is the user documentation, with every difference
from NiFi.
"""

from flowactors.sdk.record_path.errors import RecordPathError
from flowactors.sdk.record_path.parser import RecordPath, compile_path
from flowactors.sdk.record_path.values import FieldValue, remove_fields

__all__ = ["FieldValue", "RecordPath", "RecordPathError", "compile_path", "remove_fields"]
