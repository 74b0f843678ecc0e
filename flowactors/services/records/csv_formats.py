"""What the CSV services share: Apache Commons CSV's format names and dialects as NiFi offers them,
the quote modes, the properties every CSV service has alike (``Character Set``, ``Trim
Fields``), the Escape Character's validator and the lines of a text without its comments. Used
by the CSV reader and writer (``csv.py``) and the CSV lookup services
(``flowactors.services.lookup``).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from typing import Iterable, Iterator

from flowactors.sdk.processor import PropertyDescriptor, validators
from flowactors.services.records.textual import single_char_problem

#: the CSV Format values of NiFi's CSV reader and writer
CUSTOM, RFC_4180, EXCEL, TDF = "Custom Format", "RFC 4180", "Microsoft Excel", "Tab-Delimited"
MYSQL, INFORMIX, INFORMIX_CSV = "MySQL Format", "Informix Unload", "Informix Unload Escape Disabled"
#: two more the CSV lookup services take (Commons CSV's DEFAULT and its RFC4180 by its own name)
DEFAULT, RFC4180_COMPAT = "Default Format", "RFC4180"

#: the Quote Mode values (Commons CSV's QuoteMode)
QUOTE_ALL, QUOTE_MINIMAL = "Quote All Values", "Quote Minimal"
QUOTE_NON_NUMERIC, QUOTE_NONE = "Quote Non-Numeric Values", "Do Not Quote Values"

#: NiFi's names of the CSV Format values (in an exported flow) and this module's
NIFI_FORMAT_VALUES = {"custom": CUSTOM, "rfc-4180": RFC_4180, "excel": EXCEL, "tdf": TDF, "mysql": MYSQL,
                      "informix-unload": INFORMIX, "informix-unload-csv": INFORMIX_CSV}
#: NiFi's names of the Quote Mode values and this module's
NIFI_QUOTE_MODES = {"ALL": QUOTE_ALL, "MINIMAL": QUOTE_MINIMAL, "NON_NUMERIC": QUOTE_NON_NUMERIC, "NONE": QUOTE_NONE}


@dataclass(frozen=True)
class CsvDialect:
    """How a CSV text is split into values (Apache Commons CSV's formats, as NiFi uses them)."""

    separator: str = ","
    quote: str | None = '"'
    escape: str | None = None
    comment: str | None = None
    trim: bool = False

    def reader(self, lines: Iterator[str]) -> Iterator[list[str]]:
        """Python's ``csv`` reader of ``lines`` in this dialect (comments are not skipped)."""
        quoting = csv.QUOTE_MINIMAL if self.quote else csv.QUOTE_NONE
        return csv.reader(lines, delimiter=self.separator, quotechar=self.quote, escapechar=self.escape,
                          quoting=quoting, doublequote=bool(self.quote), strict=False)


#: the predefined formats (Commons CSV's DEFAULT, RFC4180, EXCEL, TDF, MYSQL, INFORMIX_UNLOAD(_CSV))
PREDEFINED = {DEFAULT: CsvDialect(), RFC4180_COMPAT: CsvDialect(), RFC_4180: CsvDialect(), EXCEL: CsvDialect(),
              TDF: CsvDialect("\t", trim=True), MYSQL: CsvDialect("\t", None, "\\"),
              INFORMIX: CsvDialect("|", '"', "\\"), INFORMIX_CSV: CsvDialect(",", '"')}

CHARSET = PropertyDescriptor("Character Set", "The character set of the CSV text", required=True,
                             default="UTF-8", validator=validators.CHARSET, expression_language=True)
TRIM_FIELDS = PropertyDescriptor("Trim Fields", "Whether spaces around values are removed (Custom Format only)",
                                 required=True, default="true", allowable_values=("true", "false"))


def escape_problem(value: str) -> str | None:
    """A validator of Escape Character: empty (no escape), or one character once Java escapes are read."""
    return None if value == "" else single_char_problem(value)


class CommentedLines:
    """The lines of a text without those starting with the comment marker (None: no comments);
    ``line`` is the number of the last line given, comments counted, for messages."""

    def __init__(self, lines: Iterable[str], comment: str | None):
        self._lines = iter(lines)
        self._comment = comment
        self.line = 0

    def __iter__(self) -> "CommentedLines":
        return self

    def __next__(self) -> str:
        while True:
            text = next(self._lines)
            self.line += 1
            if not self._comment or not text.startswith(self._comment):
                return text
