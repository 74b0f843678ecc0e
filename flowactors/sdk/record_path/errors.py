"""The one error of the RecordPath language: a path that does not compile, or an evaluation that
cannot go on (a function given a value it cannot take)."""

from __future__ import annotations

from flowactors.sdk.expression.language import excerpt  # the expression language's: a long text around a position
from flowactors.sdk.records.schema import printable   # a message stays one line: line breaks in the path escaped

#: the most characters of ``message`` shown (a function's message may quote a value of the record)
_MESSAGE_CHARS = 600


class RecordPathError(ValueError):
    """A syntax or evaluation error, pointing at the character of the path at fault.

    ``message`` says what is wrong, ``position`` is the 0-based index in ``text`` (the whole path)
    of the token or function at fault, ``text`` the path ("" until the path is known: evaluation
    errors are raised by the nodes, which the compiled path fills in). All three are the exception's
    ``args``, so it pickles (Ray sends exceptions between processes).
    """

    def __init__(self, message: str, position: int = 0, text: str = "") -> None:
        super().__init__(message, position, text)
        self.message = message
        self.position = position
        self.text = text

    def with_text(self, text: str) -> RecordPathError:
        """The same error, naming the path ``text`` it was raised in."""
        return RecordPathError(self.message, self.position, text)

    def __str__(self) -> str:
        """One line: the message (line breaks escaped, cut at ``_MESSAGE_CHARS``), and where."""
        message = printable(self.message, _MESSAGE_CHARS)
        if not self.text:
            return message
        return f"{message} at position {self.position} in '{printable(excerpt(self.text, self.position))}'"

