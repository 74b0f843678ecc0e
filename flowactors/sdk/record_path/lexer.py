"""The tokens of a RecordPath, as NiFi's lexer makes them (``RecordPathLexer.g``).

A name starts with any character but ``/ [ ] * " ' , = ? < > ( )``, a blank, a digit, ``.`` or
``-``, and goes on with any of those but the first five groups (so ``my.field-2`` is one name); a
string is quoted with ``'`` or ``"``, where ``\\'``, ``\\"``, ``\\n``, ``\\r``, ``\\t`` stand for the
character and any other ``\\x`` stays as written (so regular expressions keep their escapes); a
number is whole, with an optional ``-``. Blanks separate tokens and are skipped.
"""

from __future__ import annotations

from typing import NamedTuple

from flowactors.sdk.record_path.errors import RecordPathError

# token kinds
SLASH, DESCENDANT, LBRACKET, RBRACKET, LPAREN, RPAREN, COMMA = "/", "//", "[", "]", "(", ")", ","
RANGE, DOT, STAR, OPERATOR, NAME, STRING, NUMBER, END = "..", ".", "*", "operator", "name", "string", "number", "end"

_OPERATORS = ("<=", ">=", "!=", "<", ">", "=")
_SINGLE = {"[": LBRACKET, "]": RBRACKET, "(": LPAREN, ")": RPAREN, ",": COMMA, "*": STAR}
_NOT_IN_NAME = frozenset("/[]*\"',\t\r\n\f =?<>()")
_NOT_FIRST_IN_NAME = _NOT_IN_NAME | frozenset("0123456789.-")
_BLANKS = " \t\n\r\f"
#: the digits of a number (NiFi's grammar: ASCII ones; '³' or '٣' start a name)
_DIGITS = frozenset("0123456789")
_ESCAPES = {"'": "'", '"': '"', "n": "\n", "r": "\r", "t": "\t"}


class Token(NamedTuple):
    """One token: its kind, its text (a string's value, a number's digits) and where it starts."""
    kind: str
    text: str
    position: int


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with an END token; RecordPathError at a character that starts
    no token, or a string left open."""
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in _BLANKS:
            i += 1
        elif c == "/":
            double = text.startswith("//", i)
            tokens.append(Token(DESCENDANT if double else SLASH, "//" if double else "/", i))
            i += 2 if double else 1
        elif c == ".":
            double = text.startswith("..", i)
            tokens.append(Token(RANGE if double else DOT, ".." if double else ".", i))
            i += 2 if double else 1
        elif c in _SINGLE:
            tokens.append(Token(_SINGLE[c], c, i))
            i += 1
        elif c == "'" or c == '"':
            value, end = _string(text, i)
            tokens.append(Token(STRING, value, i))
            i = end
        elif c in _DIGITS or (c == "-" and i + 1 < n and text[i + 1] in _DIGITS):
            end = i + 1
            while end < n and text[end] in _DIGITS:
                end += 1
            tokens.append(Token(NUMBER, text[i:end], i))
            i = end
        elif operator := next((o for o in _OPERATORS if text.startswith(o, i)), None):
            tokens.append(Token(OPERATOR, operator, i))
            i += len(operator)
        elif c not in _NOT_FIRST_IN_NAME:
            end = i + 1
            while end < n and text[end] not in _NOT_IN_NAME:
                end += 1
            tokens.append(Token(NAME, text[i:end], i))
            i = end
        else:
            raise RecordPathError(f"unexpected character {c!r}", i, text)
    tokens.append(Token(END, "", n))
    return tokens


def _string(text: str, start: int) -> tuple[str, int]:
    """The value of the string quoted at ``start``, and where it ends."""
    quote = text[start]
    out: list[str] = []
    i, n = start + 1, len(text)
    while i < n:
        c = text[i]
        if c == quote:
            return "".join(out), i + 1
        if c == "\\" and i + 1 < n:
            escaped = text[i + 1]
            out.append(_ESCAPES.get(escaped, "\\" + escaped))
            i += 2
            continue
        if c in "\n\r\t":
            raise RecordPathError("a line break or tab inside a string must be written \\n, \\r or \\t", i, text)
        out.append(c)
        i += 1
    raise RecordPathError(f"the string opened here has no closing {quote}", start, text)
