"""The steps of a path, each from the values so far to the next ones (NiFi's path segments):
``/name``, ``/*``, ``//name``, ``//*``, ``/..``, ``/.``, ``[2]``, ``[0, 2..4, -1]``, ``['key']``,
``['a', 'b']``, ``[*]`` and predicates ``[condition]``.
"""

from __future__ import annotations

from typing import Iterable

from flowactors.sdk.record_path.nodes import Context, Filter, Step
from flowactors.sdk.record_path.shapes import ARRAY, MAP, RECORD, Shape
from flowactors.sdk.record_path.values import ELEMENT, ENTRY, FIELD, FieldValue, array_like, map_like, record_like


class Child(Step):
    """``/name``: the field ``name`` of each record, None when the record lacks it (so it can be
    set: ``update`` adds it). Of a value that is no record (or a missing record), a value None that
    cannot be set, as NiFi gives one."""

    __slots__ = ("name",)

    def __init__(self, name: str, position: int) -> None:
        super().__init__(position)
        self.name = name

    def apply(self, values: list[FieldValue], ctx: Context) -> list[FieldValue]:
        name = self.name
        out = []
        for fv in values:
            shape = fv.shape
            child_shape = shape.child(name) if shape is not None and shape.kind == RECORD else None
            value = fv.value
            if isinstance(value, dict) and (shape is None or shape.kind != MAP):
                out.append(FieldValue(value.get(name), name, child_shape, fv, FIELD, name))
            else:
                out.append(FieldValue(None, name, child_shape, fv, FIELD, name))
        return out


def _fields(fv: FieldValue) -> Iterable[FieldValue]:
    """The fields of a record, those whose value is not None."""
    shape = fv.shape
    child_shape = shape.child if shape is not None and shape.kind == RECORD else _unknown
    for name, value in fv.value.items():
        if value is not None:
            yield FieldValue(value, name, child_shape(name), fv, FIELD, name)


def _unknown(name: str) -> Shape | None:
    """No shape: where the schema says nothing."""
    return None


def _elements(fv: FieldValue) -> list[FieldValue]:
    """The elements of an array."""
    shape = fv.shape
    item = shape.item() if shape is not None and shape.kind == ARRAY else None
    name = fv.name
    return [FieldValue(value, name, item, fv, ELEMENT, index) for index, value in enumerate(fv.value)]


def _entries(fv: FieldValue) -> list[FieldValue]:
    """The entries of a map."""
    shape = fv.shape
    item = shape.item() if shape is not None and shape.kind == MAP else None
    name = fv.name
    return [FieldValue(value, name, item, fv, ENTRY, key) for key, value in fv.value.items()]


def _record_elements(fv: FieldValue) -> list[FieldValue]:
    """The elements of an array of records (an array whose type says its elements are records, or
    whose elements are all dicts), none for any other array."""
    shape = fv.shape
    item = shape.item() if shape is not None and shape.kind == ARRAY else None
    if item is not None and item.kind == RECORD or (fv.value and all(type(v) is dict for v in fv.value)):
        return _elements(fv)
    return []


class WildcardChild(Step):
    """``/*``: every field of each record whose value is not None."""

    __slots__ = ()

    def apply(self, values: list[FieldValue], ctx: Context) -> list[FieldValue]:
        out: list[FieldValue] = []
        for fv in values:
            if record_like(fv):
                out.extend(_fields(fv))
        return out


class Descendant(Step):
    """``//name`` (``//*`` without a name): the fields named ``name`` (every field) whose value is not
    None at any depth below each record, in record order, a field before what is inside it;
    inside records, arrays of records and maps (a map's entries count as fields: ``//name`` finds
    the entries whose key is ``name``)."""

    __slots__ = ("name",)

    def __init__(self, name: str | None, position: int) -> None:
        super().__init__(position)
        self.name = name

    def apply(self, values: list[FieldValue], ctx: Context) -> list[FieldValue]:
        out: list[FieldValue] = []
        for fv in values:
            if record_like(fv):
                self._below(fv, out)
        return out

    def _below(self, record: FieldValue, out: list[FieldValue]) -> None:
        name = self.name
        for child in _fields(record):
            if name is None or child.name == name:
                out.append(child)
            if record_like(child):
                self._below(child, out)
            elif array_like(child):
                for element in _record_elements(child):
                    self._below(element, out)
            elif map_like(child):
                out.extend(e for e in _entries(child) if name is None or e.key == name)


class Parent(Step):
    """``/..``: the parent of each value (none for the root record)."""

    __slots__ = ()

    def apply(self, values: list[FieldValue], ctx: Context) -> list[FieldValue]:
        return [fv.parent for fv in values if fv.parent is not None]


class Current(Step):
    """``/.`` (or ``.`` after a step): the same values."""

    __slots__ = ()

    def apply(self, values: list[FieldValue], ctx: Context) -> list[FieldValue]:
        return values


class ArrayIndex(Step):
    """``[i]``: the element at ``i`` of each array, counted from the end when negative; nothing
    for an index past either end."""

    __slots__ = ("index",)

    def __init__(self, index: int, position: int) -> None:
        super().__init__(position)
        self.index = index

    def apply(self, values: list[FieldValue], ctx: Context) -> list[FieldValue]:
        out = []
        for fv in values:
            if array_like(fv):
                array = fv.value
                index = self.index if self.index >= 0 else len(array) + self.index
                if 0 <= index < len(array):
                    shape = fv.shape
                    item = shape.item() if shape is not None and shape.kind == ARRAY else None
                    out.append(FieldValue(array[index], fv.name, item, fv, ELEMENT, index))
        return out


class ArrayIndexes(Step):
    """``[0, 2..4, -1]``: for each array, the elements at each index and each range of indexes (both
    ends included, negative ones counted from the end), in the order written, an element as often
    as it is named; indexes past the ends are skipped, a range counting down selects nothing."""

    __slots__ = ("ranges",)

    def __init__(self, ranges: tuple[tuple[int, int], ...], position: int) -> None:
        super().__init__(position)
        self.ranges = ranges

    def apply(self, values: list[FieldValue], ctx: Context) -> list[FieldValue]:
        out: list[FieldValue] = []
        for fv in values:
            if not array_like(fv):
                continue
            array, name = fv.value, fv.name
            item = fv.shape.item() if fv.shape is not None and fv.shape.kind == ARRAY else None
            length = len(array)
            for low, high in self.ranges:
                low = low if low >= 0 else length + low
                high = min(high if high >= 0 else length + high, length - 1)
                if low >= 0:
                    out.extend(FieldValue(array[index], name, item, fv, ELEMENT, index) for index in range(low, high + 1))
        return out


class MapKey(Step):
    """``['key']``: the entry ``key`` of each map, None when the map lacks it (so it can be set)."""

    __slots__ = ("keys",)

    def __init__(self, keys: tuple[str, ...], position: int) -> None:
        super().__init__(position)
        self.keys = keys

    def apply(self, values: list[FieldValue], ctx: Context) -> list[FieldValue]:
        out: list[FieldValue] = []
        for fv in values:
            if map_like(fv):
                shape = fv.shape
                item = shape.item() if shape is not None and shape.kind == MAP else None
                entries = fv.value
                out.extend(FieldValue(entries.get(key), fv.name, item, fv, ENTRY, key) for key in self.keys)
        return out


class WildcardIndex(Step):
    """``[*]``: every element of each array and every entry of each map."""

    __slots__ = ()

    def apply(self, values: list[FieldValue], ctx: Context) -> list[FieldValue]:
        out: list[FieldValue] = []
        for fv in values:
            if array_like(fv):
                out.extend(_elements(fv))
            elif map_like(fv):
                out.extend(_entries(fv))
        return out


class Predicate(Step):
    """``[condition]``: the values for which the condition holds, each the context node (``.``)
    while its condition is evaluated."""

    __slots__ = ("condition",)

    def __init__(self, condition: Filter, position: int) -> None:
        super().__init__(position)
        self.condition = condition

    def apply(self, values: list[FieldValue], ctx: Context) -> list[FieldValue]:
        out = []
        saved = ctx.node
        try:
            for fv in values:
                ctx.node = fv
                if self.condition.select(ctx, False):
                    out.append(fv)
        finally:
            ctx.node = saved
        return out
