"""The functions that make or look into records, arrays and maps, or look at values' fields:
arrayOf, mapOf, recordOf, count, anchored, fieldName, coalesce."""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from flowactors.sdk.record_path.conversions import java_text
from flowactors.sdk.record_path.errors import RecordPathError
from flowactors.sdk.record_path.functions.base import Call, EachValue
from flowactors.sdk.record_path.functions.registry import register
from flowactors.sdk.record_path.nodes import Context, Node, first
from flowactors.sdk.record_path.shapes import LONG, RECORD, STRING, STRING_MAP, Shape, infer_type, shape_of
from flowactors.sdk.record_path.values import FieldValue, array_like, computed, record_like


def _type_of(fv: FieldValue) -> pa.DataType | None:
    """A value's Arrow type: its field's, else what pyarrow infers from the value."""
    return fv.type if fv.type is not None else infer_type(fv.value)


class _ArrayOf(Call):
    """``arrayOf(a, b, ...)``: a list of every value of every argument, in order (no value: no
    result); its type is a list of the values' type when they share one."""

    __slots__ = ()

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        selected = [fv for arg in self.args for fv in arg.evaluate(ctx)]
        if not selected:
            return []
        types = [_type_of(fv) for fv in selected]
        shared = types[0] if types[0] is not None and all(t == types[0] for t in types) else None
        return [computed([fv.value for fv in selected], None, shape_of(pa.list_(shared)) if shared else None,
                         "arrayOf")]


register("arrayOf", 1, None)(lambda args, position: _ArrayOf("arrayOf", args, position))


class _Pairs(Call):
    """A function of name/value pairs: each pair's first values (an argument selecting nothing is an
    error, as in NiFi)."""

    __slots__ = ()

    def pairs(self, ctx: Context) -> list[tuple[str, FieldValue]]:
        pairs = []
        for index in range(0, len(self.args), 2):
            key, value = first(self.args[index], ctx), first(self.args[index + 1], ctx)
            if key is None or value is None:
                raise self.error(f"{self.name}: argument {index + (1 if key is None else 2)} selects no value")
            pairs.append((java_text(key.value) or "null", value))
        return pairs


class _MapOf(_Pairs):
    """``mapOf(key, value, ...)``: a map of text to text (``null`` for None)."""

    __slots__ = ()

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        entries = {key: java_text(fv.value) or "null" for key, fv in self.pairs(ctx)}
        return [computed(entries, None, STRING_MAP, "mapOf")]


class _RecordOf(_Pairs):
    """``recordOf(name, value, ...)``: a record of the values (as they are), its type a struct of
    their fields' types (inferred where unknown)."""

    __slots__ = ()

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        pairs = self.pairs(ctx)
        record = {name: fv.value for name, fv in pairs}
        types = {name: _type_of(fv) for name, fv in pairs}
        known = all(t is not None for t in types.values())
        shape = shape_of(pa.struct([(name, t) for name, t in types.items()])) if known else None
        return [computed(record, None, shape, "recordOf")]


def _even(name: str, maker: type[_Pairs]) -> None:
    @register(name, 0, None)
    def build(args: Sequence[Node], position: int) -> Node:
        if len(args) % 2:
            raise RecordPathError(f"{name} takes pairs of arguments (a name, then a value), but {len(args)} "
                                  f"were given", position)
        return maker(name, args, position)


_even("mapOf", _MapOf)
_even("recordOf", _RecordOf)


class _Count(Call):
    """``count(path)``: how many values the argument selects."""

    __slots__ = ()

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        return [computed(len(self.args[0].evaluate(ctx)), None, LONG, "count")]


register("count", 1)(lambda args, position: _Count("count", args, position))


class _Anchored(Call):
    """``anchored(anchor, path)``: the second path evaluated with each record the first selects as
    its root (each record of an array it selects)."""

    __slots__ = ()

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        out: list[FieldValue] = []
        for fv in self.args[0].evaluate(ctx):
            if record_like(fv):
                out.extend(self.args[1].evaluate(Context(fv.value, _record_shape(fv.shape))))
            elif array_like(fv):
                item = fv.shape.item() if fv.shape is not None else None
                for element in fv.value:
                    if isinstance(element, dict):
                        out.extend(self.args[1].evaluate(Context(element, _record_shape(item))))
        return out


def _record_shape(shape: Shape | None) -> Shape | None:
    return shape if shape is not None and shape.kind == RECORD else None


register("anchored", 2)(lambda args, position: _Anchored("anchored", args, position))


class _FieldName(EachValue):
    """``fieldName(path)``: the name of each selected value's field (of a function's value, the
    function's name); a literal has none (an error)."""

    __slots__ = ()
    keeps_none = True

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        if fv.name is None:
            raise self.error(f"fieldName: {fv.describe()} has no field name")
        return computed(fv.name, fv, STRING)


register("fieldName", 1)(lambda args, position: _FieldName("fieldName", args, position))


class _Coalesce(Call):
    """``coalesce(a, b, ...)``: the first value, in argument order, that is not None (each argument's
    first value counts); nothing when all are None."""

    __slots__ = ()

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        for arg in self.args:
            fv = first(arg, ctx)
            if fv is not None and fv.value is not None:
                return [fv]
        return []


register("coalesce", 1, None)(lambda args, position: _Coalesce("coalesce", args, position))
