"""The compiled tree's frame: what an evaluation sees (``Context``), the node every part of a path
is (``Node``: it evaluates to a list of FieldValues), a path (a start and its steps) and its
starts (the root record, the context node, its parent, a literal), and the filters' interface.

The steps are in ``steps``, the filters in ``filters``, the functions in ``functions``.
"""

from __future__ import annotations

from typing import Any

from flowactors.sdk.record_path.errors import RecordPathError
from flowactors.sdk.record_path.shapes import Shape
from flowactors.sdk.record_path.values import ROOT, FieldValue, literal


class Context:
    """One evaluation: ``root`` the root record's FieldValue, ``node`` the context node that
    relative paths (``.``, ``..``) start from: the record being filtered inside a predicate, the
    caller's context outside (the root record when none was given)."""

    __slots__ = ("root", "node")

    def __init__(self, record: dict, shape: Shape | None, node: FieldValue | None = None) -> None:
        self.root = FieldValue(record, "root", shape, None, ROOT, None)
        self.node = node if node is not None else self.root


class Node:
    """A part of the compiled path that evaluates to values. ``position`` is where it starts in
    the path's text (errors name it)."""

    __slots__ = ("position",)

    def __init__(self, position: int) -> None:
        self.position = position

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        raise NotImplementedError

    def error(self, message: str) -> RecordPathError:
        """An evaluation error at this node."""
        return RecordPathError(message, self.position)


class Step:
    """One step of a path: from the values so far to the next ones."""

    __slots__ = ("position",)

    def __init__(self, position: int) -> None:
        self.position = position

    def apply(self, values: list[FieldValue], ctx: Context) -> list[FieldValue]:
        raise NotImplementedError


class Filter:
    """A condition (a comparison or a filter function). ``select(ctx, invert)`` gives the values of
    its subject that pass (that fail, inverted; ``not`` inverts); ``booleans(ctx)`` gives, for each
    value of its subject, whether it passes (a filter used as a value: ``isEmpty(/name)``)."""

    __slots__ = ("position",)

    def __init__(self, position: int) -> None:
        self.position = position

    def select(self, ctx: Context, invert: bool) -> list[FieldValue]:
        raise NotImplementedError

    def booleans(self, ctx: Context) -> list[FieldValue]:
        raise NotImplementedError


class RootStart(Node):
    """``/``: the root record."""

    __slots__ = ()

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        return [ctx.root]


class CurrentStart(Node):
    """``.`` at the start of a relative path: the context node."""

    __slots__ = ()

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        return [ctx.node]


class ParentStart(Node):
    """``..`` at the start of a relative path: the context node's parent (none for the root)."""

    __slots__ = ()

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        parent = ctx.node.parent
        return [parent] if parent is not None else []


class Path(Node):
    """A start and the steps after it, each applied to the values of the one before."""

    __slots__ = ("start", "steps")

    def __init__(self, start: Node, steps: tuple[Step, ...]) -> None:
        super().__init__(start.position)
        self.start = start
        self.steps = steps

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        values = self.start.evaluate(ctx)
        for step in self.steps:
            if not values:
                break
            values = step.apply(values, ctx)
        return values


class Literal(Node):
    """A string or a number written in the path."""

    __slots__ = ("value",)

    def __init__(self, value: Any, position: int) -> None:
        super().__init__(position)
        self.value = value

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        return [literal(self.value)]


class FilterValue(Node):
    """A filter used as a value: for each value of its subject, whether it passes."""

    __slots__ = ("filter",)

    def __init__(self, condition: Filter) -> None:
        super().__init__(condition.position)
        self.filter = condition

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        return self.filter.booleans(ctx)


def first(node: Node, ctx: Context) -> FieldValue | None:
    """The first value ``node`` evaluates to (None when it selects nothing)."""
    values = node.evaluate(ctx)
    return values[0] if values else None


def first_value(node: Node, ctx: Context) -> Any:
    """The value of the first FieldValue ``node`` evaluates to (None when it selects nothing)."""
    values = node.evaluate(ctx)
    return values[0].value if values else None
