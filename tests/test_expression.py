"""The attribute expression language (flowactors/sdk/expression/, docs/expression-language.md)."""

from __future__ import annotations

import pickle
import re
import socket
import time
import uuid
from datetime import datetime

import pytest

from flowactors.sdk.expression import CompiledValue, ExpressionError, compile_value
from repositories.model import ContentClaim, FlowFile, ResourceClaim

ATTRS = {
    "a": "Hello World",
    "n": "10",
    "f": "2.5",
    "empty": "",
    "blank": " \t ",
    "t": "true",
    "T": "TRUE",
    "no": "false",
    "file": "report.2024.csv",
    "url": "https://nifi.apache.org/some value with spaces",
    "my attr": "spaced",
    "it's": "quoted",
    "my.attr-name_1": "dotted",
    "re": "[",
    "ms": "1700000000123",
    "padded": " \t in side \n",
    "raw": "a~b*c_-. é",
    "encoded": "https%3A%2F%2Fx%2Fa+b%2B%C3%A9",
    "bad_escape": "abc%zz",
    "padded_number": " 42 ",
    "group_ref": "$1",
}

# 1700000000123 ms = Tuesday 2023-11-14 22:13:20.123 UTC = 17:13:20.123 in New York (UTC-5).
MILLIS = 1700000000123


def ev(text: str, attributes: dict[str, str] | None = None, **kwargs: object) -> str:
    return compile_value(text).evaluate(ATTRS if attributes is None else attributes, **kwargs)


def error(text: str, attributes: dict[str, str] | None = None) -> ExpressionError:
    """The ExpressionError that compiling, then evaluating, ``text`` raises."""
    with pytest.raises(ExpressionError) as info:
        compile_value(text).evaluate(ATTRS if attributes is None else attributes)
    assert info.value.text == text
    return info.value


# --- literal text and escaping ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", ""),
        ("plain text", "plain text"),
        ("costs $5 } { $", "costs $5 } { $"),
        ("$${a}", "${a}"),
        ("$$${a}", "$Hello World"),
        ("$$$${a}", "$${a}"),
        ("$$$$${a}", "$$Hello World"),
        ("You owe me $$5 too", "You owe me $$5 too"),
        ("x $${a} ${n}", "x ${a} 10"),
    ],
)
def test_literal_text_and_dollar_escapes(text: str, expected: str) -> None:
    assert ev(text) == expected


def test_is_literal() -> None:
    assert compile_value("plain").is_literal
    escaped = compile_value("$${a}")
    assert escaped.is_literal and escaped.evaluate() == "${a}" and escaped.text == "$${a}"
    assert not compile_value("${a}").is_literal
    assert not compile_value("x${now()}").is_literal
    assert not compile_value("$$${a}").is_literal


def test_text_around_expressions() -> None:
    assert ev("<${a}|${n}>") == "<Hello World|10>"
    assert ev("${a}${n}") == "Hello World10"


# --- attributes ------------------------------------------------------------------------------


def test_attribute_references() -> None:
    assert ev("${a}") == "Hello World"
    assert ev("${my.attr-name_1}") == "dotted"
    assert ev("${'my attr'}") == "spaced"
    assert ev('${"my attr"}') == "spaced"
    assert ev("${'it\\'s'}") == "quoted"
    assert ev('${"it\'s"}') == "quoted"
    assert ev("${ a : toUpper ( ) }") == "HELLO WORLD"


def test_missing_attribute_is_empty_and_null() -> None:
    assert ev("[${missing}]") == "[]"
    assert ev("${missing:isNull()}") == "true"
    assert ev("${empty:isNull()}") == "false"
    assert compile_value("${a}").evaluate() == ""
    assert compile_value("${a}").evaluate(None) == ""


def test_attribute_values_are_not_evaluated_again() -> None:
    assert ev("${x}", {"x": "${a}"}) == "${a}"


# --- string literals -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("${literal('a\\'b')}", "a'b"),
        ('${literal("a\\"b")}', 'a"b'),
        ('${literal("it\'s")}', "it's"),
        ("${literal('say \"hi\"')}", 'say "hi"'),
        ("${literal('back\\\\slash')}", "back\\slash"),
        ("${literal('a\\nb\\tc\\rd')}", "a\nb\tc\rd"),
        ("${literal('\\d+')}", "\\d+"),  # other backslashes stay, for regular expressions
        ("${literal('$${a}')}", "${a}"),
        ("${literal('')}", ""),
    ],
)
def test_string_literal_escapes(text: str, expected: str) -> None:
    assert ev(text) == expected


# --- nesting ---------------------------------------------------------------------------------


def test_nested_expressions() -> None:
    assert ev("${a:append(${n})}") == "Hello World10"
    assert ev("${a:append(' #${n:plus(1)}!')}") == "Hello World #11!"
    assert ev("${literal('${literal(\"in\"):toUpper()}')}") == "IN"
    assert ev("${a:equals(${'my attr':toUpper():toLower()})}") == "false"
    assert ev("${'my attr':equals(${a:replace('Hello World', 'spaced')})}") == "true"
    assert ev("${n:equals(${literal(10)})}") == "true"
    assert ev("${n:plus(${f:plus(${n})})}") == "22.5"
    # a nested expression keeps its type: a date stays a date for format()
    assert ev("${literal(${ms:toNumber()}):format('yyyy', 'UTC')}") == "2023"


# --- chaining --------------------------------------------------------------------------------


def test_chaining() -> None:
    assert ev("${file:substringBefore('.'):toUpper():append('!')}") == "REPORT!"
    assert ev("${file:substringBefore('.'):toUpper():append('!'):length()}") == "7"
    assert ev("${n:plus(5):gt(14):and(${a:startsWith('He')}):ifElse('big', 'small')}") == "big"


# --- every function --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        # text
        ("${a:toUpper()}", "HELLO WORLD"),
        ("${a:toLower()}", "hello world"),
        ("${padded:trim()}", "in side"),
        ("${blank:trim()}", ""),
        ("${file:substringBefore('.')}", "report"),
        ("${file:substringBefore('zz')}", "report.2024.csv"),
        ("${file:substringAfter('.')}", "2024.csv"),
        ("${file:substringAfter('zz')}", "report.2024.csv"),
        ("${a:substring(6)}", "World"),
        ("${a:substring(0, 5)}", "Hello"),
        ("${a:substring(11)}", ""),
        ("${a:substring(20)}", ""),   # out of range: empty, as NiFi
        ("${a:substring(3, 2)}", ""),
        ("${a:substring(-1)}", ""),
        ("${a:substring('1', ${literal(2)})}", "e"),
        ("${a:replace('o', '0')}", "Hell0 W0rld"),
        ("${a:replace('.', '!')}", "Hello World"),  # not a regular expression
        ("${file:replaceAll('\\.csv$', '.txt')}", "report.2024.txt"),
        ("${file:replaceAll('(\\w+)\\.(\\d+)', '$2-$1')}", "2024-report.csv"),
        ("${file:replaceAll('(?<base>\\w+)\\..*', '$${base}')}", "report"),
        ("${file:replaceAll('\\d', '\\\\$')}", "report.$$$$.csv"),
        ("${a:replaceAll('(l+)', '$10')}", "He" + "ll0" + "o Wor" + "l0" + "d"),
        ("${a:replaceAll('(x)?o', '[$1]')}", "Hell[] W[]rld"),
        ("${a:append('!')}", "Hello World!"),
        ("${missing:append('!')}", "!"),
        ("${a:prepend('>')}", ">Hello World"),
        ("${a:length()}", "11"),
        ("${missing:length()}", "0"),
        ("${url:urlEncode()}", "https%3A%2F%2Fnifi.apache.org%2Fsome+value+with+spaces"),
        ("${raw:urlEncode()}", "a%7Eb*c_-.+%C3%A9"),
        ("${encoded:urlDecode()}", "https://x/a b+é"),
        ("${url:urlEncode():urlDecode()}", "https://nifi.apache.org/some value with spaces"),
        # tests on text
        ("${a:equals('Hello World')}", "true"),
        ("${a:equals('hello world')}", "false"),
        ("${n:equals(10)}", "true"),
        ("${missing:equals('')}", "false"),
        ("${empty:equals('')}", "true"),
        ("${a:equalsIgnoreCase('hELLO wORLD')}", "true"),
        ("${a:equalsIgnoreCase('Hello')}", "false"),
        ("${a:contains('lo W')}", "true"),
        ("${a:contains('low')}", "false"),
        ("${missing:contains('')}", "false"),
        ("${a:startsWith('Hell')}", "true"),
        ("${a:startsWith('World')}", "false"),
        ("${a:endsWith('World')}", "true"),
        ("${a:endsWith('Hell')}", "false"),
        ("${a:matches('H.*d')}", "true"),
        ("${a:matches('World')}", "false"),  # the whole value must match
        ("${literal('abab'):matches('(?<x>ab)\\k<x>')}", "true"),
        ("${a:find('Wor')}", "true"),
        ("${a:find('^World')}", "false"),
        ("${empty:isEmpty()}", "true"),
        ("${blank:isEmpty()}", "true"),
        ("${missing:isEmpty()}", "true"),
        ("${a:isEmpty()}", "false"),
        ("${missing:isNull()}", "true"),
        ("${empty:isNull()}", "false"),
        ("${missing:toUpper():isNull()}", "true"),
        ("${missing:notNull()}", "false"),
        ("${empty:notNull()}", "true"),
        # numbers
        ("${n:gt(9)}", "true"),  # numeric, not text, comparison
        ("${n:gt(10)}", "false"),
        ("${n:ge(10)}", "true"),
        ("${n:ge(10.5)}", "false"),
        ("${f:lt(3)}", "true"),
        ("${f:lt(2.5)}", "false"),
        ("${f:le(2.5)}", "true"),
        ("${f:le(2)}", "false"),
        ("${missing:gt(1)}", "false"),
        ("${n:lt(${missing})}", "false"),
        ("${n:plus(5)}", "15"),
        ("${n:plus(-20)}", "-10"),
        ("${n:plus(${f})}", "12.5"),
        ("${f:plus(0.5)}", "3.0"),   # a decimal, written as Java writes one (as NiFi)
        ("${n:minus(3)}", "7"),
        ("${n:minus(0.5)}", "9.5"),
        ("${literal(0.1):plus(0.2)}", "0.30000000000000004"),
        ("${missing:plus(1)}", ""),
        ("${missing:plus(1):isNull()}", "true"),
        ("${n:toNumber()}", "10"),
        ("${padded_number:toNumber()}", "42"),
        ("${f:toNumber()}", "2"),   # a whole number: the decimal cut toward zero, as NiFi
        ("${a:toNumber():isNull()}", "true"),   # not a number: missing, as NiFi
        ("${empty:toNumber():isNull()}", "true"),
        ("${ms:toNumber():plus(1)}", "1700000000124"),
        ("${missing:toNumber():isNull()}", "true"),
        # booleans
        ("${t:not()}", "false"),
        ("${T:not()}", "false"),
        ("${no:not()}", "true"),
        ("${a:not()}", "true"),  # text other than 'true' is false, as in NiFi
        ("${missing:not()}", "true"),
        ("${t:and(${n:gt(5)})}", "true"),
        ("${t:and(false)}", "false"),
        ("${no:and(true)}", "false"),
        ("${no:or(${T})}", "true"),
        ("${no:or('false')}", "false"),
        ("${t:ifElse('yes', 'no')}", "yes"),
        ("${no:ifElse('yes', 'no')}", "no"),
        ("${a:ifElse('yes', 'no')}", "no"),
        ("${missing:isNull():ifElse(${a}, 'no')}", "Hello World"),
        # subject-less
        ("${literal('x')}", "x"),
        ("${literal(7):plus(1)}", "8"),
        ("${literal(true)}", "true"),
        ("${literal(2.0)}", "2.0"),
        ("${literal(1e3)}", "1000.0"),
        ("${literal(1e7)}", "1.0E7"),
        ("${literal(0.0001)}", "1.0E-4"),
        ("${literal(-4)}", "-4"),
    ],
)
def test_function(text: str, expected: str) -> None:
    assert ev(text) == expected


def test_booleans_and_numbers_render_as_text() -> None:
    assert ev("${a:contains('o')}|${n:plus(0.0)}|${f:plus(0)}|${n:plus(0)}") == "true|10.0|2.5|10"


def test_and_or_ifelse_evaluate_only_what_they_need() -> None:
    # ${a:plus(1):gt(1)} would fail ('Hello World' is not a number), but is never evaluated
    assert ev("${no:and(${a:plus(1):gt(1)})}") == "false"
    assert ev("${t:or(${a:plus(1):gt(1)})}") == "true"
    assert ev("${t:ifElse('ok', ${a:plus(1):gt(1)})}") == "ok"
    assert ev("${no:ifElse(${a:plus(1):gt(1)}, 'ok')}") == "ok"
    with pytest.raises(ExpressionError):
        ev("${t:and(${a:plus(1):gt(1)})}")


# --- dates -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, zone, expected",
    [
        ("yyyy-MM-dd HH:mm:ss.SSS", "UTC", "2023-11-14 22:13:20.123"),
        ("yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "America/New_York", "2023-11-14T17:13:20.123-05:00"),
        ("yy/M/d h:m:s a", "UTC", "23/11/14 10:13:20 PM"),
        ("EEE MMM dd yyyy", "UTC", "Tue Nov 14 2023"),
        ("EEEE d MMMM", "UTC", "Tuesday 14 November"),
        ("HH:mm Z", "America/New_York", "17:13 -0500"),
        ("HH:mm Z|X|XX|XXX", "UTC", "22:13 +0000|Z|Z|Z"),
        ("X XX XXX", "Asia/Kolkata", "+05 +0530 +05:30"),
        ("h 'o''clock', '''quoted'''", "UTC", "10 o'clock, 'quoted'"),
        ("S SS SSSS", "UTC", "123 123 0123"),
        ("yyyyy", "UTC", "02023"),
    ],
)
def test_format(pattern: str, zone: str, expected: str) -> None:
    assert ev(f'${{ms:format("{pattern}", "{zone}")}}') == expected


def test_format_accepts_dates_numbers_and_numeric_text() -> None:
    assert ev("${literal(0):format('yyyy-MM-dd HH:mm', 'GMT')}") == "1970-01-01 00:00"
    assert ev("${literal(-1):format('yyyy-MM-dd HH:mm:ss.SSS', 'UTC')}") == "1969-12-31 23:59:59.999"
    assert ev("${ms:toNumber():format('SSS', 'UTC')}") == "123"
    assert ev("${missing:format('yyyy')}") == ""


def test_format_without_zone_uses_local_time() -> None:
    expected = datetime.fromtimestamp(MILLIS // 1000).strftime("%Y-%m-%d %H:%M:%S")
    assert ev("${ms:format('yyyy-MM-dd HH:mm:ss')}") == expected


def test_format_with_zone_from_an_expression() -> None:
    assert ev("${ms:format('HH', ${z})}", {**ATTRS, "z": "Asia/Kolkata"}) == "03"


# --- now(), UUID(), hostname() ---------------------------------------------------------------


def test_now_renders_epoch_millis() -> None:
    before = time.time_ns() // 1_000_000
    value = ev("${now()}")
    after = time.time_ns() // 1_000_000
    assert value.isdigit() and before <= int(value) <= after


def test_now_is_read_once_per_evaluation() -> None:
    first, second, third = ev("${now()}|${now():toNumber()}|${now():plus(0)}").split("|")
    assert first == second == third


def test_now_format_in_local_time() -> None:
    millis, formatted = ev("${now()} ${now():format('yyyy-MM-dd HH:mm:ss.SSS')}").split(" ", 1)
    moment = datetime.fromtimestamp(int(millis) // 1000)
    assert formatted == f"{moment:%Y-%m-%d %H:%M:%S}.{int(millis) % 1000:03d}"


def test_now_arithmetic() -> None:
    assert ev("${now():gt(1700000000000)}") == "true"
    before = time.time_ns() // 1_000_000
    yesterday = int(ev("${now():minus(86400000)}"))
    assert before - 86400000 <= yesterday <= before - 86400000 + 60_000


def test_uuid() -> None:
    first, second = ev("${UUID()} ${UUID()}").split(" ")
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", first)
    assert uuid.UUID(first).version == 4
    assert first != second


def test_hostname() -> None:
    assert ev("${hostname()}") == socket.gethostname()
    assert ev("${hostname(false)}") == socket.gethostname()
    assert ev("${hostname(true)}") == socket.getfqdn()


# --- FlowFile fields -------------------------------------------------------------------------


def make_flowfile(attributes: dict[str, str], length: int | None = 42) -> FlowFile:
    claim = ContentClaim(ResourceClaim("default", "1", "claim-1"), 10, length) if length is not None else None
    return FlowFile(
        id=7,
        uuid="0e0a6b2e-5c39-4a55-8f30-0b7c1a1d2f11",
        attributes=attributes,
        claim=claim,
        entry_date=MILLIS,
        lineage_start_date=MILLIS - 60_000,
    )


def test_flowfile_attributes_and_fields() -> None:
    flowfile = make_flowfile({"filename": "in.txt"})
    value = compile_value("${filename}|${fileSize}|${entryDate}|${lineageStartDate}|${uuid}")
    assert value.evaluate(flowfile=flowfile) == (
        f"in.txt|42|{MILLIS}|{MILLIS - 60_000}|0e0a6b2e-5c39-4a55-8f30-0b7c1a1d2f11"
    )


def test_flowfile_fields_work_with_functions() -> None:
    flowfile = make_flowfile({})
    assert compile_value("${fileSize:gt(41)}").evaluate(flowfile=flowfile) == "true"
    assert compile_value("${fileSize:plus(8)}").evaluate(flowfile=flowfile) == "50"
    assert compile_value("${entryDate:format('HH:mm:ss.SSS', 'UTC')}").evaluate(flowfile=flowfile) == "22:13:20.123"
    assert compile_value("${lineageStartDate:format('mm', 'UTC')}").evaluate(flowfile=flowfile) == "12"
    assert compile_value("${entryDate:minus(${lineageStartDate})}").evaluate(flowfile=flowfile) == "60000"
    assert compile_value("${fileSize}").evaluate(flowfile=make_flowfile({}, length=None)) == "0"


def test_attributes_take_precedence_over_flowfile_fields() -> None:
    flowfile = make_flowfile({"fileSize": "big", "uuid": "attribute-uuid"})
    assert compile_value("${fileSize}/${uuid}").evaluate(flowfile=flowfile) == "big/attribute-uuid"


def test_explicit_attributes_replace_the_flowfile_attributes() -> None:
    flowfile = make_flowfile({"filename": "in.txt"})
    value = compile_value("${filename}|${other}|${fileSize}")
    assert value.evaluate({"other": "o"}, flowfile=flowfile) == "|o|42"


def test_flowfile_fields_need_a_flowfile() -> None:
    assert ev("[${fileSize}${entryDate}${lineageStartDate}${uuid}]", {}) == "[]"


# --- compile errors, with their positions ----------------------------------------------------


def test_error_message_format() -> None:
    err = error("${a:equals('x'}")
    assert str(err) == "expected ')' at position 14 in '${a:equals('x'}'"
    assert err.position == 14
    assert isinstance(err, ValueError)


@pytest.mark.parametrize(
    "text, position, message",
    [
        # unclosed ${ (the position is the '$' that opens it): an error, where NiFi keeps the text
        ("${a", 0, "unclosed '${'"),
        ("abc ${a:toUpper()", 4, "unclosed '${'"),
        ("${a:append(${b", 11, "unclosed '${'"),
        ("${a:equals('x'", 0, "unclosed '${'"),
        ("${", 0, "unclosed '${'"),
        ("${a:append('${b')}", 12, "unclosed '${'"),
        # unclosed string (the position is its opening quote)
        ("${a:append('x)}", 11, "unclosed string"),
        ('${a:append("x\\")}', 11, "unclosed string"),
        ("${'attr}", 2, "unclosed string"),
        # unknown function (the position is its name)
        ("${a:toUpperr()}", 4, "unknown function 'toUpperr' (did you mean toUpper()?)"),
        ("${a:touppER()}", 4, "did you mean toUpper()?"),
        ("${uuid()}", 2, "did you mean UUID()?"),
        ("${a:frobnicate()}", 4, "unknown function 'frobnicate'"),
        ("x ${a:toUpper():nope()}", 16, "unknown function 'nope'"),
        # a function used without or with a subject wrongly
        ("${toUpper()}", 2, "toUpper() needs a subject"),
        ("${a:now()}", 4, "now() takes no subject"),
        # missing parentheses (the position is where '(' should be)
        ("${a:toUpper}", 11, "expected '(' after toUpper"),
        ("${a:toUpper:toLower()}", 11, "expected '(' after toUpper"),
        ("${a:trim :length()}", 9, "expected '(' after trim"),
        # wrong number of arguments: too few at ')', too many at the first surplus argument
        ("${a:equals()}", 11, "equals() takes exactly 1 argument, got 0"),
        ("${a:replace('x')}", 15, "replace() takes exactly 2 arguments, got 1"),
        ("${a:substring()}", 14, "substring() takes 1 or 2 arguments, got 0"),
        ("${a:substring(1, 2, 3)}", 20, "substring() takes 1 or 2 arguments"),
        ("${a:toUpper('x')}", 12, "toUpper() takes no arguments"),
        ("${now(1)}", 6, "now() takes no arguments"),
        ("${literal()}", 10, "literal() takes exactly 1 argument, got 0"),
        # other syntax errors
        ("${a:equals('x'}", 14, "expected ')'"),
        ("${a:substring(1 2)}", 16, "expected ',' or ')'"),
        ("${}", 2, "expected an attribute name or a function call"),
        ("${:toUpper()}", 2, "expected an attribute name or a function call"),
        ("${a:}", 4, "expected a function name after ':'"),
        ("${a b}", 4, "quote attribute names that contain blanks"),
        ("${a:toUpper() x}", 14, "expected ':' or '}'"),
        ("${a:equals(x)}", 11, "unquoted text 'x'"),
        ("${a:equals(,)}", 11, "expected an argument"),
        ("${a:equals('x',)}", 15, "equals() takes exactly 1 argument"),
        # errors inside string literals point into the original text, escapes included
        ("${a:append('x${b:nope()}')}", 17, "unknown function 'nope'"),
        ("${a:append('\\'${b:nope()}')}", 18, "unknown function 'nope'"),
        ('${a:append("${b:append(\'${c:toUpper}\')}")}', 35, "expected '(' after toUpper"),
        # literal regular expressions, replacements, date patterns and zones (at the argument)
        ("${a:matches('[')}", 12, "matches(): invalid regular expression '['"),
        ("${a:find('(')}", 9, "find(): invalid regular expression '('"),
        ("${a:replaceAll('a', '$2')}", 20, "no group 2"),
        ("${a:replaceAll('(?<g>a)', '$${h}')}", 26, "no group named 'h'"),
        ("${a:replaceAll('a', 'x$')}", 20, "'$' in the replacement must be followed"),
        ("${a:replaceAll('a', '\\\\')}", 20, "lone '\\'"),
        ("${a:format('yyyy-QQ')}", 11, "unsupported letter 'Q'"),
        ("${a:format(\"'open\")}", 11, "unclosed quote in date pattern"),
        ("${a:format('XXXX')}", 11, "at most 3 X"),
        ("${a:format('yyyy', 'Mars/Olympus')}", 19, "unknown time zone 'Mars/Olympus'"),
    ],
)
def test_compile_error(text: str, position: int, message: str) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_value(text)
    err = info.value
    assert (err.position, err.text) == (position, text)
    assert message in err.message
    assert str(err) == f"{err.message} at position {position} in '{text}'"


def test_too_deep_nesting() -> None:
    text = "${a:append(" * 70 + "'x'" + ")}" * 70
    with pytest.raises(ExpressionError, match="nested more than 64 deep") as info:
        compile_value(text)
    assert info.value.position == 64 * len("${a:append(")


# --- evaluation errors, with the position of the failing function ----------------------------


@pytest.mark.parametrize(
    "text, position, message",
    [
        ("${n:plus('one')}", 4, "plus(): argument 'one' is not a number"),
        ("${a:minus(1)}", 4, "minus(): subject 'Hello World' is not a number"),
        ("${literal(true):toNumber()}", 16, "toNumber(): subject true is not a number"),
        ("${a:substring('x')}", 4, "substring(): start 'x' is not a number"),
        ("${a:substring(0, 1.5)}", 4, "substring(): end 1.5 is not a whole number"),
        ("${a:format('yyyy')}", 4, "format(): 'Hello World' is not a date: neither a number of milliseconds"),
        ("${literal(99999999999999999):format('yyyy')}", 29, "outside the supported range of dates"),
        ("${ms:format(${missing:append('Q')})}", 5, "unsupported letter 'Q'"),
        ("${ms:format('yyyy', ${a})}", 5, "unknown time zone 'Hello World'"),
        ("${ms:format('yyyy', ${missing})}", 5, "unknown time zone ''"),
        ("${a:substring(1, ${missing})}", 4, "substring(): end (missing) is not a number"),
        ("${bad_escape:urlDecode()}", 13, "urlDecode(): invalid escape '%zz' at index 3"),
        ("${a:matches(${re})}", 4, "matches(): invalid regular expression '['"),
        ("${a:replaceAll('o', ${group_ref})}", 4, "no group 1"),
        ("${literal(3):not()}", 13, "not(): expected true or false, got 3"),
        ("${t:and(${n:toNumber()})}", 4, "and(): expected true or false, got 10"),
        ("${n:toNumber():ifElse('a', 'b')}", 15, "ifElse(): expected true or false, got 10"),
        ("${a:append('-${b:append(${n:plus(${a})})}')}", 28, "plus(): argument 'Hello World'"),
    ],
)
def test_evaluation_error(text: str, position: int, message: str) -> None:
    compiled = compile_value(text)  # compiles fine: the problem is only in the data
    with pytest.raises(ExpressionError) as info:
        compiled.evaluate(ATTRS)
    err = info.value
    assert (err.position, err.text) == (position, text)
    assert message in err.message
    assert str(err) == f"{err.message} at position {position} in '{text}'"


def test_booleans_from_text_are_lenient_but_numbers_are_errors() -> None:
    assert ev("${t:and(${n})}") == "false"  # text other than 'true' is false...
    with pytest.raises(ExpressionError, match="expected true or false, got 10"):
        ev("${t:and(${n:toNumber()})}")  # ...but a number is an error


# --- the compiled value ----------------------------------------------------------------------


def test_compile_value_is_cached() -> None:
    assert compile_value("${a:toUpper()}") is compile_value("${a:toUpper()}")
    assert isinstance(compile_value("${a}"), CompiledValue)


def test_compiled_value_is_reusable() -> None:
    value = compile_value("${a:toUpper()}")
    assert value.evaluate({"a": "x"}) == "X"
    assert value.evaluate({"a": "y"}) == "Y"
    assert value.evaluate({}) == ""


def test_pickling() -> None:
    value = pickle.loads(pickle.dumps(compile_value("${a:append(${n})}")))
    assert value.evaluate(ATTRS) == "Hello World10"
    with pytest.raises(ExpressionError) as info:
        compile_value("${a:nope()}")
    copy = pickle.loads(pickle.dumps(info.value))
    assert (copy.position, copy.text, str(copy)) == (4, "${a:nope()}", str(info.value))
