"""What the Arrow schema says about the fields a path walks: ``Shape``, an Arrow type seen as
NiFi's record field types (a record, an array, a map or a single value), with its children's
shapes made once, when first asked for.

A record is a Python dict, so the schema is what tells a record (an Arrow struct) from a map (an
Arrow map); without it (or where it does not say, as for a union) a dict serves as both. The root
shape of a schema is kept (``schema_shape``), so evaluating many records with one schema builds
each shape once.
"""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa

#: the kinds of shape
RECORD, ARRAY, MAP, SCALAR = range(4)

#: how many schemas' root shapes are kept
_KEPT_SCHEMAS = 256


class Shape:
    """An Arrow type and its kind; a record's children (``child``) and an array's or a map's values
    (``item``) are shapes too, made on first use and kept. A dictionary-encoded type is its value
    type; a union is no shape (``shape_of`` gives None: the value decides)."""

    __slots__ = ("type", "kind", "_children", "_item", "_item_made")

    def __init__(self, arrow_type: pa.DataType) -> None:
        self.type = arrow_type
        if pa.types.is_struct(arrow_type):
            self.kind = RECORD
        elif pa.types.is_map(arrow_type):
            self.kind = MAP
        elif (pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)
              or pa.types.is_fixed_size_list(arrow_type) or pa.types.is_list_view(arrow_type)
              or pa.types.is_large_list_view(arrow_type)):
            self.kind = ARRAY
        else:
            self.kind = SCALAR
        self._children: dict[str, Shape | None] | None = None
        self._item: Shape | None = None
        self._item_made = False

    def child(self, name: str) -> Shape | None:
        """The shape of this record's field ``name`` (None for a field the schema lacks)."""
        children = self._children
        if children is None:
            children = {}
            if self.kind == RECORD:
                for index in range(self.type.num_fields):
                    field = self.type.field(index)
                    children.setdefault(field.name, shape_of(field.type))
            self._children = children
        return children.get(name)

    def item(self) -> Shape | None:
        """The shape of this array's elements or of this map's values."""
        if not self._item_made:
            if self.kind == ARRAY:
                self._item = shape_of(self.type.value_type)
            elif self.kind == MAP:
                self._item = shape_of(self.type.item_type)
            self._item_made = True
        return self._item


def shape_of(arrow_type: pa.DataType | None) -> Shape | None:
    """The shape of ``arrow_type``: None for none, or for a union (whose values decide)."""
    if arrow_type is None or pa.types.is_union(arrow_type):
        return None
    if pa.types.is_dictionary(arrow_type):
        return shape_of(arrow_type.value_type)
    return Shape(arrow_type)


_schemas: dict[int, tuple[pa.Schema, Shape]] = {}
_schemas_lock = threading.Lock()


def schema_shape(schema: pa.Schema) -> Shape:
    """The record shape of ``schema``, the same object for the same schema object (a few hundred
    schemas are kept)."""
    kept = _schemas.get(id(schema))
    if kept is not None and kept[0] is schema:
        return kept[1]
    shape = Shape(pa.struct(list(schema)))
    with _schemas_lock:
        if len(_schemas) >= _KEPT_SCHEMAS:
            _schemas.clear()
        _schemas[id(schema)] = (schema, shape)
    return shape


#: shapes of the values functions make
STRING = Shape(pa.string())
LONG = Shape(pa.int64())
DOUBLE = Shape(pa.float64())
BOOLEAN = Shape(pa.bool_())
BYTES = Shape(pa.binary())
TIMESTAMP = Shape(pa.timestamp("ms", tz="UTC"))
STRING_MAP = Shape(pa.map_(pa.string(), pa.string()))


def infer_type(value: Any) -> pa.DataType | None:
    """The Arrow type pyarrow gives ``value`` (null for None), or None when it cannot (a list of
    mixed values)."""
    try:
        return pa.scalar(value).type
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None
