"""``FieldValue``: one value a path selects, where it is (its field's name, its parent) and how to
change it in place (``update``, ``remove``).

A record is a dict (its fields by name), an array a list, a map a dict; ``record_like``,
``map_like`` and ``array_like`` say what a value is, the schema's shape telling a record from a map
where it knows (``shapes``).
"""

from __future__ import annotations

from typing import Any, Iterable

import pyarrow as pa

from flowactors.sdk.record_path.errors import RecordPathError
from flowactors.sdk.record_path.shapes import MAP, RECORD, Shape

#: where a value is: the root record, a record's field, an array's element, a map's entry, a
#: literal of the path, or a value a function computed
ROOT, FIELD, ELEMENT, ENTRY, LITERAL, COMPUTED = range(6)


class FieldValue:
    """A value a path selected.

    ``value`` is the value (None for a missing field); ``name`` the name of its field (for an
    array's element or a map's entry, the array's or the map's field, as NiFi names them; None for
    a literal); ``parent`` the FieldValue it was found in (None for the root record and for
    literals); ``type`` its Arrow type where the schema (or the function that made it) says, else
    None. ``index`` is an element's position in its array, ``map_key`` an entry's key.

    ``update(value)`` writes a new value where this one is: the field of the parent record (adding
    it when the record lacks it), the array's element, the map's entry. ``remove()`` takes it out.
    A literal's or a function's value is not in the record: both refuse.
    """

    __slots__ = ("value", "name", "shape", "parent", "role", "key")

    def __init__(self, value: Any, name: str | None, shape: Shape | None, parent: FieldValue | None,
                 role: int, key: Any) -> None:
        self.value = value
        self.name = name
        self.shape = shape
        self.parent = parent
        self.role = role
        self.key = key

    @property
    def type(self) -> pa.DataType | None:
        """The value's Arrow type, when known."""
        return self.shape.type if self.shape is not None else None

    @property
    def index(self) -> int | None:
        """The position of an array's element in its array (None for other values)."""
        return self.key if self.role == ELEMENT else None

    @property
    def map_key(self) -> str | None:
        """The key of a map's entry (None for other values)."""
        return self.key if self.role == ENTRY else None

    @property
    def parent_record(self) -> dict | None:
        """The record holding this value: the nearest record among its parents (None for the root
        record and for a literal)."""
        parent = self.parent
        while parent is not None:
            if record_like(parent):
                return parent.value
            parent = parent.parent
        return None

    def update(self, value: Any) -> bool:
        """Set this value to ``value`` where it is, and here. True when set; False when there is
        nowhere to set it (the field of a record that is missing, or of a value that is no
        record: NiFi does nothing there too). The root record takes a record (a dict) only, whose
        fields replace its own. RecordPathError for a literal's or a function's value, or for an
        element that is no longer in its array."""
        role = self.role
        parent = self.parent
        if role == FIELD:
            if parent is None or not record_like(parent):
                return False
            parent.value[self.key] = value
        elif role == ELEMENT or role == ENTRY:
            container = parent.value if parent is not None else None
            if role == ELEMENT:
                if not (isinstance(container, list) and self.key < len(container)):
                    raise RecordPathError(f"cannot update element {self.key} of field '{self.name}': "
                                          f"it is no longer in a list (a tuple is read only)")
                container[self.key] = value
            else:
                if not isinstance(container, dict):
                    raise RecordPathError(f"cannot update entry '{self.key}' of field '{self.name}': "
                                          f"it is no longer in a map")
                container[self.key] = value
        elif role == ROOT:
            if not isinstance(value, dict) or not isinstance(self.value, dict):
                raise RecordPathError(f"the root record can only be replaced by a record (a dict), "
                                      f"not {type(value).__name__}")
            if value is not self.value:
                self.value.clear()
                self.value.update(value)
            return True
        else:
            raise RecordPathError(f"cannot update {self.describe()}: it is not in the record")
        self.value = value
        return True

    def remove(self) -> bool:
        """Take this value out of its record, array or map. True when removed, False when it was
        not there. To remove several elements of one array, use ``remove_fields`` (which removes
        them from the last, so the positions stay right). RecordPathError for the root record, a
        literal or a function's value."""
        role = self.role
        container = self.parent.value if self.parent is not None else None
        if role == FIELD:
            if not isinstance(container, dict) or self.key not in container:
                return False
            del container[self.key]
            return True
        if role == ELEMENT:
            if not isinstance(container, list) or self.key >= len(container):
                return False
            del container[self.key]
            return True
        if role == ENTRY:
            return isinstance(container, dict) and container.pop(self.key, _ABSENT) is not _ABSENT
        raise RecordPathError(f"cannot remove {self.describe()}: it is not a field, an element or a map entry")

    def logical_path(self) -> str:
        """The path that leads to this value alone, e.g. ``/accounts[1]/address`` or
        ``/attributes['state']`` ("" for the root record)."""
        parts: list[str] = []
        node: FieldValue | None = self
        while node is not None and node.role != ROOT:
            if node.role == ELEMENT:
                parts.append(f"[{node.key}]")
            elif node.role == ENTRY:
                parts.append("['" + str(node.key).replace("\\", "\\\\").replace("'", "\\'") + "']")
            elif node.role == FIELD:
                parts.append("/" + _name_in_path(node.key))
            else:
                raise RecordPathError(f"{self.describe()} is not in the record, so it has no path")
            node = node.parent
        return "".join(reversed(parts))

    def describe(self) -> str:
        """The value as messages name it."""
        if self.role == LITERAL:
            return f"the literal {self.value!r}"
        if self.role == COMPUTED:
            return f"the value {self.value!r} computed by {self.name or 'a function'}"
        if self.role == ROOT:
            return "the root record"
        return f"field '{self.name}'"

    def __repr__(self) -> str:
        return f"FieldValue({self.name!r}, {self.value!r})"


_ABSENT = object()


def _name_in_path(name: str) -> str:
    """A field name as a path writes it: bare when it is a name the path language reads as one."""
    if name and name[0] not in "0123456789.-" and not any(c in _QUOTED_IN_NAMES for c in name):
        return name
    return "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


_QUOTED_IN_NAMES = frozenset("/[]*\"',\t\r\n =?<>() ")


def record_like(fv: FieldValue) -> bool:
    """Whether the value is a record: a dict that the schema does not call a map."""
    return isinstance(fv.value, dict) and (fv.shape is None or fv.shape.kind != MAP)


def map_like(fv: FieldValue) -> bool:
    """Whether the value is a map: a dict that the schema does not call a record."""
    return isinstance(fv.value, dict) and (fv.shape is None or fv.shape.kind != RECORD)


def array_like(fv: FieldValue) -> bool:
    """Whether the value is an array (a list, or a tuple: read only)."""
    return isinstance(fv.value, (list, tuple))


def literal(value: Any) -> FieldValue:
    """A value written in the path."""
    return FieldValue(value, None, None, None, LITERAL, None)


def computed(value: Any, source: FieldValue | None, shape: Shape | None, name: str | None = None) -> FieldValue:
    """A value a function made: named and placed as ``source`` (NiFi keeps the field of the value a
    function changed), or named ``name`` when given (a function making a new value names it)."""
    if source is None:
        return FieldValue(value, name, shape, None, COMPUTED, None)
    return FieldValue(value, name if name is not None else source.name, shape, source.parent, COMPUTED, None)


def remove_fields(values: Iterable[FieldValue]) -> int:
    """Remove every value of ``values`` (as ``FieldValue.remove``); elements of one array are removed
    from the last, so each removes the element it selected. How many were removed."""
    elements: list[FieldValue] = []
    removed = 0
    for fv in values:
        if fv.role == ELEMENT:
            elements.append(fv)
        else:
            removed += fv.remove()
    seen: set[tuple[int, int]] = set()
    elements.sort(key=lambda fv: fv.key, reverse=True)
    for fv in elements:
        where = (id(fv.parent.value) if fv.parent is not None else 0, fv.key)
        if where not in seen:
            seen.add(where)
            removed += fv.remove()
    return removed
