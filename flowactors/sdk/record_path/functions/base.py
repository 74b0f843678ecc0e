"""What the functions share: a call (its name and compiled arguments), a call that maps each value
of its first argument (``EachValue``), reading an argument's first value as text, and the bound on
the text one function may make."""

from __future__ import annotations

from typing import Any, Sequence

from flowactors.sdk.expression.language import MAX_EVALUATION_CHARS
from flowactors.sdk.record_path.conversions import java_text
from flowactors.sdk.record_path.nodes import Context, Node, first_value
from flowactors.sdk.record_path.values import FieldValue


class Call(Node):
    """A function call: its ``name`` and its compiled ``args``."""

    __slots__ = ("name", "args")

    def __init__(self, name: str, args: Sequence[Node], position: int) -> None:
        super().__init__(position)
        self.name = name
        self.args = tuple(args)

    def text_of(self, index: int, ctx: Context) -> str | None:
        """The first value of argument ``index`` as text (None when it selects nothing or None;
        None too for an argument the call was not given)."""
        if index >= len(self.args):
            return None
        return java_text(first_value(self.args[index], ctx))

    def check_size(self, chars: int) -> None:
        """Refuse to make a text of ``chars`` characters past ``MAX_EVALUATION_CHARS``."""
        if chars > MAX_EVALUATION_CHARS:
            raise self.error(f"{self.name} would make {chars:,} characters of text, more than the "
                             f"{MAX_EVALUATION_CHARS:,} one evaluation may make")


class EachValue(Call):
    """A call that maps each value of its first argument (those that are not None, unless
    ``keeps_none``) to one result (``each``)."""

    __slots__ = ()
    keeps_none = False

    def each(self, fv: FieldValue, ctx: Context) -> FieldValue:
        raise NotImplementedError

    def evaluate(self, ctx: Context) -> list[FieldValue]:
        keeps_none = self.keeps_none
        return [self.each(fv, ctx) for fv in self.args[0].evaluate(ctx) if keeps_none or fv.value is not None]


def text_argument(value: Any) -> str:
    """A literal argument's text, for the checks made when a path is compiled."""
    return java_text(value) or ""
