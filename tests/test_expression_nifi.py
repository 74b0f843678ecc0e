"""NiFi's own unit tests of its expression language, run against ours (docs/expression-language.md,
"NiFi's unit tests").

``tests/expression_nifi_cases.py`` holds the assertions of NiFi's TestQuery.java and
TestStandardPreparedQuery.java as data: ``CASES``, and ``JSON_PATH_EDITS`` for the JSONPath tests,
which NiFi writes with a helper that edits a document and checks it again. Every assertion gives NiFi's
result, except the few in ``DIFFERENCES`` (each one documented, with its reason, in
docs/expression-language.md): for those the test checks the behaviour we document instead, and that
it still differs from NiFi's (a difference fixed must leave the list).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from flowactors import run_flow
from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.sdk.expression import ExpressionError, compile_value
from flowactors.sdk.parameters import ParameterError, substitute
from tests.expression_nifi_cases import (ADDRESS_BOOK, ADDRESS_BOOK_PATHS, ATTRIBUTES, CASES, ERROR, EXPRESSION,
                                         INVALID, JSON_PATH_EDITS, LITERAL, LOCAL_ZONES, PARAMETERS, STATE, VALID)
from tests.nifi_flows import STANDARD, connection, group, processor, snapshot

#: the cases (NiFi test, line) where we deliberately give another result: what we give instead
DIFFERENCES: dict[tuple[str, int], str] = {
    # a date renders as its milliseconds, not as Java's Date.toString
    ("TestQuery.testToDateAdjustedWithTimeZone", 1042): "1748736000000",
    # a '${' without its '}', and an empty '${}', are errors (NiFi keeps the text): a typo is reported
    ("TestQuery.testEscape", 252): INVALID,
    ("TestQuery.testEscape", 257): INVALID,
    ("TestQuery.testEscape", 259): INVALID,
    ("TestStandardPreparedQuery.testIsExpressionLanguagePresent", 330): INVALID,
    # functions may follow count() and join(): they apply to the count, the joined text
    ("TestQuery.testFunctionAfterReduce", 2217): "false",
    # Python names the main thread MainThread, the JVM names it main
    ("TestQuery.testThread", 2423): "MainThread",
    # a parameter's name is written unquoted: #{test param}, not #{'test param'} (flowactors.sdk.parameters)
    ("TestQuery.testParameterReferenceWithSpace", 447): INVALID,
    ("TestQuery.testParameterReferenceWithSpace", 448): INVALID,
    ("TestQuery.testParameterReferenceWithSpace", 450): INVALID,
}

#: the share of NiFi's assertions that must hold as they are
REQUIRED_SHARE = 0.95


@contextmanager
def local_time_zone(zone: str) -> Iterator[None]:
    """The machine's time zone, for the evaluation (NiFi's tests set the JVM's default)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = zone
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


def outcome(test: str, expression: str, attributes: str, expected: str) -> str:
    """What ``expression`` gives: its text; INVALID when compiling (or resolving its parameters, as
    a flow does first) refuses it; ERROR when evaluating fails; for LITERAL / EXPRESSION cases,
    whether it holds an expression to evaluate."""
    try:
        if test in PARAMETERS:
            expression = substitute(expression, PARAMETERS[test])
        value = compile_value(expression)
    except (ExpressionError, ParameterError):
        return INVALID
    if expected in (LITERAL, EXPRESSION):
        return LITERAL if value.is_literal else EXPRESSION
    try:
        with local_time_zone(LOCAL_ZONES.get(test, "UTC")):
            return value.evaluate(ATTRIBUTES[attributes], state=STATE.get(test))
    except ExpressionError:
        return ERROR


def holds(expected: str, got: str) -> bool:
    """NiFi's ERROR (an exception) holds for a refusal when compiling or evaluating; VALID for
    anything that compiles."""
    if expected == ERROR:
        return got in (ERROR, INVALID)
    if expected == VALID:
        return got != INVALID
    return got == expected


#: the NiFi tests, each with its cases (one pytest test a NiFi test: its assertions checked together)
_BY_TEST: dict[str, list[tuple]] = {}
for _case in CASES:
    _BY_TEST.setdefault(_case[0], []).append(_case)


@pytest.mark.parametrize("test", list(_BY_TEST), ids=[t.split(".")[-1] for t in _BY_TEST])
def test_nifi_assertions_hold(test: str) -> None:
    """Each assertion of the NiFi test gives NiFi's result, or (a documented difference) ours."""
    wrong = []
    for _, line, expression, attributes, expected in _BY_TEST[test]:
        got = outcome(test, expression, attributes, expected)
        if (test, line) in DIFFERENCES:
            if got != DIFFERENCES[test, line] or holds(expected, got):   # a fixed one leaves DIFFERENCES
                wrong.append((line, expression, f"documented {DIFFERENCES[test, line]!r}", got))
        elif not holds(expected, got):
            wrong.append((line, expression, expected, got))
    assert wrong == []


def json_path_edit(edit: tuple) -> tuple[int, list[tuple]]:
    """NiFi's helper on one edit of the address book: the changed path before, every other path
    unchanged after, the changed path after, then the test's own checks (or, for an edit NiFi
    refuses, that it fails). How many assertions that is, and the ones that do not hold."""
    _, _, path, before, expression, after, further = edit
    book = {"json": ADDRESS_BOOK}
    checks = [(path, book, before)] if path else []
    try:
        edited = {"json": compile_value(expression).evaluate(book)}
    except ExpressionError:
        edited = None
    if after == ERROR or edited is None:
        failed = [] if (after == ERROR) == (edited is None) else [(expression, after, ERROR if edited is None else
                                                                   edited["json"])]
        return len(checks) + 1, _not_holding(checks) + failed
    checks += [(other, edited, compile_value(other).evaluate(book)) for other in ADDRESS_BOOK_PATHS if other != path]
    checks += [(path, edited, after)] if path else []
    checks += [(check, edited, value) for check, value in further]
    return len(checks), _not_holding(checks)


def _not_holding(checks: list[tuple]) -> list[tuple]:
    return [(text, value, got) for text, attributes, value in checks
            if (got := compile_value(text).evaluate(attributes)) != value]


@pytest.mark.parametrize("edit", JSON_PATH_EDITS, ids=[e[0].split(".")[-1] for e in JSON_PATH_EDITS])
def test_nifi_json_path_edits_hold(edit: tuple) -> None:
    assert json_path_edit(edit)[1] == []


def test_differences_are_few_and_each_documented() -> None:
    assert set(DIFFERENCES) <= {case[:2] for case in CASES}
    total = len(CASES) + sum(json_path_edit(edit)[0] for edit in JSON_PATH_EDITS)
    assert total - len(DIFFERENCES) >= REQUIRED_SHARE * total
    guide = (Path(__file__).parent.parent / "docs" / "expression-language.md").read_text()
    undocumented = [f"{test.split('.')[0]}.java:{line}" for test, line in DIFFERENCES
                    if f"{test.split('.')[0]}.java:{line}" not in guide]
    assert undocumented == []


def _flow(source: Path, out: Path, other: Path) -> dict:
    """GetFile -> UpdateAttribute -> RouteOnAttribute -> PutFile, as NiFi exports it, with property
    values that use what NiFi's language does and ours once did not."""
    root = "root"
    get = processor(root, "get", STANDARD + "GetFile", {"Input Directory": str(source), "Keep Source File": "false",
                                                        "Minimum File Age": "0 sec"})
    tag = processor(root, "tag", "org.apache.nifi.processors.attributes.UpdateAttribute", {
        "Delete Attributes Expression": None, "Store State": "Do not store state",
        "Stateful Variables Initial Value": None, "Cache Value Lookup Cache Size": "100",
        "kind": "${filename:substringAfter('.'):substring(0, 3)}",
        "filename": "${filename:substringBefore('.'):toUpper() # the stem\n}-${fileSize:toDecimal():divide(2)}.txt"})
    route = processor(root, "route", STANDARD + "RouteOnAttribute", {
        "Routing Strategy": "Route to Property name",
        "csv": "${allAttributes('kind'):equals('csv')}"}, auto_terminate=("unmatched",))
    store = processor(root, "store", STANDARD + "PutFile", {"Directory": str(out)}, auto_terminate=("success", "failure"))
    rest = processor(root, "rest", STANDARD + "PutFile", {"Directory": str(other)}, auto_terminate=("success", "failure"))
    links = [connection(root, get, tag, ("success",)), connection(root, tag, route, ("success",)),
             connection(root, route, store, ("csv",)), connection(root, route, rest, ("unmatched",))]
    return snapshot(group(root, "el", None, None, processors=[get, tag, route, store, rest], connections=links), {})


def test_a_nifi_flow_evaluates_its_properties_as_nifi_does(tmp_path: Path) -> None:
    source, out, other = (tmp_path / name for name in ("in", "out", "other"))
    for folder in (source, out, other):
        folder.mkdir()
    (source / "data.csv").write_text("a,b\n")      # 4 bytes: 4 / 2 = 2.0, a decimal written as NiFi writes it
    (source / "notes.txt").write_text("hello")
    flow = flow_from_nifi(_flow(source, out, other))
    stored = lambda status: sum(p["flowfiles_in"] for p in status["processors"]   # noqa: E731
                                if p["name"] in ("store", "rest")) >= 2
    final = run_flow(flow, tmp_path / "repository", engine="in-process", timeout=60, until=stored)
    assert not final.get("timed_out"), final
    assert [path.name for path in out.iterdir()] == ["DATA-2.0.txt"]
    assert [path.name for path in other.iterdir()] == ["NOTES-2.5.txt"]
    assert (out / "DATA-2.0.txt").read_text() == "a,b\n"
