"""The bound on what one evaluation may produce (docs/expression-language.md, "Limits").

Each runaway expression here runs with the process's address space capped a little above what it
uses already (``memory_cap``): it must give NiFi's answer or ``ExpressionLimitError`` without
making its result; one that tried would fail at once with MemoryError rather than take the machine.
"""

from __future__ import annotations

import resource

import pytest

from flowactors.sdk.expression import MAX_EVALUATION_CHARS, ExpressionError, ExpressionLimitError, compile_value
from flowactors.sdk.expression.cache import MAX_CACHED_CHARS, text_cache
from flowactors.sdk.expression.language import MAX_NESTED_EVALUATIONS

BIG = "x" * 5000                                  # 5,000 x 5,000 is past the bound
NEST = "[" * 200 + "]" * 200                      # '$..*' writes it again for every level
ATTRS = {
    "attr": "hello", "big": BIG, "huge": "y" * (4 * 1024 * 1024),
    "numbers": "[" + ",".join(["0"] * 5000) + "]", "arrays": "[" + ",".join(["[]"] * 5000) + "]",
    "objects": "[" + ",".join(["{}"] * 5000) + "]", "list": ",".join(["a"] * 5000),
    "nests": "[" + ",".join([NEST] * 500) + "]", "self": "${self:evaluateELString()}",
    "twice": "${huge:append(${huge}):append(${huge})}",
}


@pytest.fixture
def memory_cap():
    """The address space limited to what the process maps now plus 512 MiB while the test runs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (mapped + 512 * 1024**2, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def ev(text: str) -> str:
    return compile_value(text).evaluate(ATTRS)


@pytest.mark.parametrize("text", [
    '${attr:padLeft(9999999999, "abc")}', '${attr:padRight(9999999999, "abc")}',   # NiFi's TestQuery
    "${attr:padLeft(9999999999)}", "${attr:padRight(2147483648, '@')}",
])
def test_padding_past_javas_largest_int_leaves_the_subject_as_nifi_does(memory_cap, text):
    assert ev(text) == "hello"


@pytest.mark.parametrize("text, culprit", [
    ("${attr:padLeft(99999999)}", "padLeft()"),   # within Java's int: NiFi would try to make it
    ("${attr:padRight(2147483647, 'ab')}", "padRight()"),
    ("${attr:repeat(9999999999)}", "repeat()"),
    ("${attr:repeat(5000000000, 9999999999)}", "repeat()"),
    ("${literal(7):toRadix(2, 9999999999)}", "toRadix()"),
    ("${big:replace('', ${big})}", "replace()"),
    ("${big:replace('x', ${big})}", "replace()"),
    ("${big:replaceAll('', ${big})}", "replaceAll()"),
    ("${big:replaceAll('x', ${big})}", "replaceAll()"),
    ("${numbers:jsonPathSet('$[*]', ${big})}", "jsonPathSet()"),
    ("${arrays:jsonPathAdd('$[*]', ${big})}", "jsonPathAdd()"),
    ("${objects:jsonPathPut('$[*]', 'k', ${big})}", "jsonPathPut()"),
    ("${nests:jsonPath('$..*')}", "jsonPath()"),
    ("${allDelineatedValues(${list}, ','):join(${big})}", "join()"),
    ("${allDelineatedValues(${list}, ','):append(${big}):join('')}", "append()"),   # the results together
    ("${huge}${huge}${huge}${huge}${huge}", "the value's text"),
    ("${huge:append(${huge}):append(${huge}):append(${huge}):append(${huge})}", "append()"),
    ("${huge:prepend(${huge}):prepend(${huge}):prepend(${huge}):prepend(${huge})}", "prepend()"),
    ("${twice:evaluateELString()}${twice:evaluateELString()}", "append()"),   # nested: the same bound
])
def test_a_runaway_result_is_refused_before_it_is_made(memory_cap, text, culprit):
    with pytest.raises(ExpressionLimitError) as caught:
        ev(text)
    message = str(caught.value)
    assert message.startswith(f"{culprit} would make the evaluation produce ")
    assert f"more than the {MAX_EVALUATION_CHARS:,} one evaluation may produce (MAX_EVALUATION_CHARS)" in message


def test_the_limit_error_is_an_expression_error_naming_the_expression_and_the_limit(memory_cap):
    with pytest.raises(ExpressionError) as caught:
        compile_value("${filename:repeat(9999999999)}").evaluate({"filename": "hello"})
    assert isinstance(caught.value, ExpressionLimitError)
    assert str(caught.value) == (
        "repeat() would make the evaluation produce 49,999,999,995 characters, more than the 16,777,216 one "
        "evaluation may produce (MAX_EVALUATION_CHARS); keep large data in the FlowFile's content "
        "at position 11 in '${filename:repeat(9999999999)}'")


def test_a_value_that_evaluates_itself_stops_at_the_nesting_bound(memory_cap):
    with pytest.raises(ExpressionLimitError, match=f"more than {MAX_NESTED_EVALUATIONS} evaluations inside one "
                                                   f"another"):
        ev("${self:evaluateELString()}")


def test_results_up_to_the_bound_are_made():
    assert len(ev(f"${{literal('x'):repeat({MAX_EVALUATION_CHARS})}}")) == MAX_EVALUATION_CHARS
    assert len(ev(f"${{attr:padLeft({MAX_EVALUATION_CHARS}, 'ab')}}")) == MAX_EVALUATION_CHARS
    assert ev("${attr:padLeft(-10, 'a')}") == "hello"


def test_whole_numbers_wrap_around_as_javas_long():
    assert ev("${literal(9223372036854775807):plus(1)}") == "-9223372036854775808"
    assert ev("${literal(-9223372036854775808):minus(1)}") == "9223372036854775807"
    assert ev("${literal(4294967296):multiply(4294967296)}") == "0"
    assert ev("${literal(-9223372036854775808):divide(-1)}") == "-9223372036854775808"
    # 3037000500^4 modulo 2^64: what Java's long arithmetic leaves, not a 38-digit number
    assert ev("${literal(3037000500):multiply(3037000500):multiply(3037000500):multiply(3037000500)}") == (
        "21162740538052864")


def test_from_radix_refuses_a_number_past_a_long():
    assert ev("${literal('7fffffffffffffff'):fromRadix(16)}") == "9223372036854775807"
    with pytest.raises(ExpressionError, match="outside the range of a whole number"):
        ev("${literal('8000000000000000'):fromRadix(16)}")


def test_an_error_in_a_long_template_quotes_the_part_around_the_fault():
    template = "x" * 1_000_000 + "${attr:repeat(9999999999)}" + "y" * 1_000_000
    with pytest.raises(ExpressionLimitError) as caught:
        compile_value("${tpl:evaluateELString()}").evaluate({"tpl": template, "attr": "hello"})
    message = str(caught.value)
    assert len(message) < 600
    assert "at position 1000007 in '...xxx" in message and "${attr:repeat(9999999999)}yyy" in message


def test_a_cache_keeps_results_of_so_much_text_only():
    made: list[str] = []

    @text_cache(entries=8)
    def parse(text: str) -> str:
        made.append(text)
        return text.upper()

    small, large = "a" * 10, "b" * (MAX_CACHED_CHARS + 1)
    assert [parse(small), parse(small)] == [small.upper()] * 2
    assert [parse(large), parse(large)] == [large.upper()] * 2
    assert made == [small, large, large]   # the large one made again, not kept
    halves = ["c" * (MAX_CACHED_CHARS // 2), "d" * (MAX_CACHED_CHARS // 2), "e" * 10]
    for text in halves + halves[:1]:
        parse(text)
    assert made[3:] == halves + halves[:1]   # the third pushed the first out


def test_compile_value_keeps_no_parse_of_a_long_value():
    short, long = "${attr:toUpper()}", "${attr}" * (MAX_CACHED_CHARS // 7 + 1)
    assert compile_value(short) is compile_value(short)
    assert compile_value(long) is not compile_value(long)
