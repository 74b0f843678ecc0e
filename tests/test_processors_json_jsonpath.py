"""The JsonPath of the JSON processors against Jayway JsonPath's behaviour: the cases of Jayway's
README and tests on its book store document, filters and their operators, functions, definite
and indefinite paths, and paths that do not compile."""

import pytest

from flowactors.processors.json.jsonpath import JsonPathError, KeySet, PathNotFound, compile_path

STORE = {
    "store": {
        "book": [
            {"category": "reference", "author": "Nigel Rees", "title": "Sayings of the Century", "price": 8.95},
            {"category": "fiction", "author": "Evelyn Waugh", "title": "Sword of Honour", "price": 12.99},
            {"category": "fiction", "author": "Herman Melville", "title": "Moby Dick", "isbn": "0-553-21311-3",
             "price": 8.99},
            {"category": "fiction", "author": "J. R. R. Tolkien", "title": "The Lord of the Rings",
             "isbn": "0-395-19395-8", "price": 22.99},
        ],
        "bicycle": {"color": "red", "price": 19.95},
    },
    "expensive": 10,
}
TITLES = ["Sayings of the Century", "Sword of Honour", "Moby Dick", "The Lord of the Rings"]


def read(path, document=STORE):
    return compile_path(path).read(document)


@pytest.mark.parametrize("path,expected", [
    ("$.store.book[*].author", ["Nigel Rees", "Evelyn Waugh", "Herman Melville", "J. R. R. Tolkien"]),
    ("$..author", ["Nigel Rees", "Evelyn Waugh", "Herman Melville", "J. R. R. Tolkien"]),
    ("$.store..price", [8.95, 12.99, 8.99, 22.99, 19.95]),
    ("$..book[2].title", ["Moby Dick"]),
    ("$..book[-2].title", ["Moby Dick"]),
    ("$..book[0,1].title", TITLES[:2]),
    ("$..book[:2].title", TITLES[:2]),
    ("$..book[1:2].title", TITLES[1:2]),
    ("$..book[-2:].title", TITLES[2:]),
    ("$..book[2:].title", TITLES[2:]),
    ("$..book[1:10].title", TITLES[1:]),              # a slice past the end stops at the end
    ("$..book[?(@.isbn)].title", TITLES[2:]),
    ("$..book[?(!@.isbn)].title", TITLES[:2]),
    ("$.store.book[?(@.price < 10)].title", [TITLES[0], TITLES[2]]),
    ("$..book[?(@.price <= $['expensive'])].title", [TITLES[0], TITLES[2]]),
    ("$..book[?(@.price > 12.99)].title", [TITLES[3]]),
    ("$..book[?(@.price >= 12.99)].title", TITLES[1:2] + TITLES[3:]),
    ("$..book[?(@.author =~ /.*REES/i)].title", [TITLES[0]]),
    ("$..book[?(@.author =~ /Rees/)].title", []),      # =~ matches the whole text
    ("$..book[?(@.category == 'fiction' && @.price < 10)].title", [TITLES[2]]),
    ("$..book[?(@.category == 'reference' || @.price > 20)].title", [TITLES[0], TITLES[3]]),
    ("$..book[?(!(@.category == 'fiction'))].title", [TITLES[0]]),
    ("$..book[?(@.isbn != '0-553-21311-3')].title", [TITLES[0], TITLES[1], TITLES[3]]),  # missing counts as !=
    ("$..book[?(@.category in ['reference', 'poetry'])].title", [TITLES[0]]),
    ("$..book[?(@.category nin ['fiction'])].title", [TITLES[0]]),
    ("$..book[?(@.title size 9)].title", [TITLES[2]]),
    ("$..book[?(@.isbn empty false)].title", TITLES[2:]),
    ("$..book[?(@.author contains 'Tolkien')].title", [TITLES[3]]),
    ("$..[?(@.price > 20)].title", [TITLES[3]]),       # a deep scan tests each object once
    ("$.store.*.color", ["red"]),
    ("$['store']['bicycle']['color']", "red"),
    ("$[\"store\"].bicycle.price", 19.95),
    ("store.bicycle.color", "red"),                   # no $: Jayway puts $. in front
    ("$.store.book[0].title", TITLES[0]),
    ("$.store.book[-1].title", TITLES[3]),
    ("$['store']['bicycle']['color','price']", {"color": "red", "price": 19.95}),   # several names at the end: merged
    ("$.store.book[*]['title','price']",
     [{"title": t, "price": p} for t, p in zip(TITLES, [8.95, 12.99, 8.99, 22.99])]),
    ("$..book.length()", 4),                           # after a deep scan: the children found
    ("$.store.book.length()", 4),
    ("$..price.sum()", pytest.approx(73.87)),
    ("$..price.min()", 8.95),
    ("$..price.max()", 22.99),
    ("$..price.avg()", pytest.approx(14.774)),
    ("$.store.bicycle.keys()", KeySet(("color", "price"))),
    ("$", STORE),
])
def test_jayway_cases_on_the_book_store(path, expected):
    assert read(path) == expected


def test_deep_scan_wildcard_reaches_every_node_below_the_root_once():
    found = read("$..*")
    assert len(found) == 28 and STORE["store"] in found and 10 in found
    assert found[:2] == [STORE["store"], 10]   # the root's values first, then depth first


@pytest.mark.parametrize("path", ["$.store.book[0].isbn", "$.nothing", "$.store.book[10]", "$.expensive.x",
                                  "$.store.bicycle[0]", "$.missing.length()"])
def test_a_definite_path_that_finds_nothing_raises_path_not_found(path):
    with pytest.raises(PathNotFound):
        read(path)


@pytest.mark.parametrize("path", ["$.store.book[*].isbn.x", "$..nothing", "$.store.book[?(@.price > 100)]",
                                  "$.expensive[*]", "$.store.book[10:]"])
def test_an_indefinite_path_that_finds_nothing_is_an_empty_list(path):
    assert read(path) == []


def test_null_values_are_found_and_exist_in_filters():
    document = {"a": None, "list": [{"x": None}, {"y": 1}]}
    assert read("$.a", document) is None
    assert read("$.list[?(@.x)]", document) == [{"x": None}]
    assert read("$.list[?(@.x == null)]", document) == [{"x": None}]


def test_numbers_equal_the_text_of_the_same_number_as_in_jayway():
    document = {"items": [{"n": 1}, {"n": "1"}, {"n": 1.0}, {"n": True}, {"n": "x"}]}
    assert read("$.items[?(@.n == 1)].n", document) == [1, "1", 1.0]
    assert read("$.items[?(@.n == '1')].n", document) == [1, "1", 1.0]
    assert read("$.items[?(@.n == true)].n", document) == [True]


def test_filter_on_an_object_tests_the_object_itself():
    assert read("$.store[?(@.bicycle)].bicycle.color") == ["red"]
    assert read("$.store.bicycle[?(@.color == 'blue')]") == []


def test_list_operators_and_json_literals():
    document = {"rows": [{"tags": ["a", "b"]}, {"tags": ["c"]}, {"tags": []}]}
    assert read("$.rows[?(@.tags subsetof ['a', 'b', 'x'])].tags", document) == [["a", "b"], []]
    assert read("$.rows[?(@.tags anyof ['b', 'c'])].tags", document) == [["a", "b"], ["c"]]
    assert read("$.rows[?(@.tags noneof ['a'])].tags", document) == [["c"], []]
    assert read("$.rows[?(@.tags size 1)].tags", document) == [["c"]]
    assert read("$.rows[?(@.tags empty true)].tags", document) == [[]]
    assert read("$.rows[?(@.tags == ['c'])].tags", document) == [["c"]]


def test_root_arrays_and_whole_number_indexes():
    document = [{"id": 0, "friends": [{"id": 0}, {"id": 1}, {"id": 2}, {"id": 3}]}]
    assert read("$[0].friends.[*].id", document) == [0, 1, 2, 3]     # NiFi's test writes .[*]
    assert read("$[0].friends[?(@.id < 3)].id", document) == [0, 1, 2]
    assert read("$[0].friends[-1:]", document) == [{"id": 3}]


def test_functions_on_what_they_cannot_take_fail_with_a_sentence():
    with pytest.raises(JsonPathError, match=r"sum\(\) needs an array"):
        read("$.store.bicycle.sum()")
    with pytest.raises(JsonPathError, match=r"without numbers"):
        read("$.tags.max()", {"tags": ["a"]})
    with pytest.raises(JsonPathError, match=r"keys\(\) needs an object"):
        read("$.store.book.keys()")


@pytest.mark.parametrize("path,why", [
    ("$..", "property name is missing"), ("$.xyz.", "property name is missing"),
    ("LoremIpsum []", "unexpected blank"), ("LoremIpsum[]", "neither a name"), ("   ", "cannot be empty"),
    ("$[0]. _id", "property name is missing"), ("$[", "never closed"), ("$.a[?(@.x ==)]", "ends early"),
    ("$.a.foo()", "unknown function foo()"), ("$[1:2:3]", "neither a name"), ("$.a[?(@.x = 1)]", "unexpected"),
    ("$.a.length().b", "a function must end the path"), ("$.a[?('x')]", "a value alone is not a test"),
])
def test_paths_that_do_not_compile_say_why(path, why):
    with pytest.raises(JsonPathError, match=why.replace("(", r"\(").replace(")", r"\)")) as caught:
        compile_path(path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("path", ["$", "$.xyz", "$['xyz']", "$.*['xyz']", "LoremIpsum@$Q#$^Q$%Q#",
                                  "TestTest['sdfadsf']#$%#$^#$^.xyz"])
def test_paths_jayway_accepts_compile(path):
    compile_path(path)


def test_definite_and_indefinite():
    assert compile_path("$.a[0]['b'].c").definite and compile_path("$.a.length()").definite
    assert compile_path("$['a','b']").definite                    # merged at the end
    for path in ["$..a", "$.a[*]", "$.a[0,1]", "$.a[1:]", "$.a[?(@.b)]", "$['a','b'].c", "$.*"]:
        assert not compile_path(path).definite, path


MULTI_STORE = {"store": [{"name": "First", "book": STORE["store"]["book"]},
                         {"name": "Second", "book": [{"category": "fiction", "title": "The Old Man and the Sea"}]}]}


@pytest.mark.parametrize("document,path,expected", [     # Jayway's InlineFilterTest
    (STORE, "store.book[ ?(@.category == @.category) ].title", TITLES),
    (STORE, "store.book[ ?(@ == @) ].title", TITLES),
    (STORE, "store.book[ ?(@.category != @.category) ].title", []),
    (STORE, "store.book[ ?(@.category != @) ].title", TITLES),
    (STORE, "$.store.book[?('a' == 'a')].title", TITLES),
    (STORE, "$.store.book[?('a' == 'b')].title", []),
    (STORE, "$.store.book[?('reference' == @.category)].title", [TITLES[0]]),
    (STORE, "$.store.book[?(/reference/ =~ @.category)].title", [TITLES[0]]),
    (STORE, "$.store.book[?(@.category =~ /REFERENCE/)].title", []),
    (STORE, "$.store.book[ ?((@.author == 'Nigel Rees') || (@.author == 'Evelyn Waugh' && @.category != 'fiction')) ]"
            ".title", [TITLES[0]]),
    (MULTI_STORE, "$.store[?(@.book[*].category =~ /Reference/i)].name", ["First"]),
    ([0, 1, None, 2, 3], "$[?(@)]", [0, 1, None, 2, 3]),
    ([0, 1, None, 2, 3], "$[?(@ != null)]", [0, 1, 2, 3]),
    ([0, 1, None, 2, 3], "$[?(!@)]", []),
    ([{"value": "5"}], "$[?(@.value=='5')]", [{"value": "5"}]),
    ([{"value": 5}], "$[?(@.value==5)]", [{"value": 5}]),
    ([{"value": 5}], "$[?(@.value=='5.1.26')]", []),
    ([{"value": 5.1}], "$[?(@.value=='5.1.26')]", []),
    ([{"value": "5.1.26"}], "$[?(@.value==5)]", []),
    ([{"value": "5"}], "$[?(@.value<'7')]", [{"value": "5"}]),
    ([{"value": 5}], "$[?(@.value<7.1)]", [{"value": 5}]),
    ([{"value": 7.1}], "$[?(@.value<5)]", []),
    (["'foo"], "$[?(@ == '\\'foo')]", ["'foo"]),
    (["x"], "$[?(@ =~ /\\/|x/)]", ["x"]),
    (["x"], '$[?(@ == "abc" || @ =~ /\\/|x/)]', ["x"]),
    ([{"s": "fo", "expected_size": "m"}, {"s": "lo", "expected_size": 2}], "$[?(@.s size @.expected_size)].s",
     ["lo"]),
    ([{"n": 12}, {"n": True}], "$[?(@.n =~ /1.*|true/)].n", [12, True]),   # numbers and booleans as written
])
def test_jayway_inline_filter_cases(document, path, expected):
    assert read(path, document) == expected


NUMS = [1, 3, 5, 7, 8, 13, 20]


@pytest.mark.parametrize("path,expected", [     # Jayway's ArraySlicingTest and ArrayIndexFilterTest
    ("$[3]", 7), ("$[:3]", [1, 3, 5]), ("$[1:5]", [3, 5, 7, 8]), ("$[0:1]", [1]), ("$[0:2]", [1, 3]),
    ("$[1:15]", [3, 5, 7, 8, 13, 20]), ("$[-3:]", [8, 13, 20]), ("$[3:]", [7, 8, 13, 20]), ("$[0,1,2]", [1, 3, 5]),
    ("$[-10:]", NUMS), ("$[:10]", NUMS), ("$[-3]", 8), ("$[:-2]", [1, 3, 5, 7, 8]), ("$[5:3]", []),
])
def test_jayway_slices_and_indexes(path, expected):
    assert read(path, NUMS) == expected


KEYS = {"int-key": 1, "long-key": 3000000000, "double-key": 10.1, "boolean-key": True, "null-key": None,
        "string-key": "string", "string-key-empty": "", "char-key": "c", "arr-empty": [], "int-arr": [0, 1, 2, 3, 4],
        "string-arr": ["a", "b", "c", "d", "e"]}


@pytest.mark.parametrize("expression,expected", [     # Jayway's FilterTest, written inline
    ("@['int-key'] == 1", True), ("@['int-key'] == '1'", True), ("1 == '1'", True), ("'1' == 1", True),
    ("1 === '1'", False), ("'1' === 1", False), ("1 === 1", True), ("@['int-key'] !== '1'", True),
    ("@['long-key'] == 3000000000", True), ("@['double-key'] == 10.10", True), ("@['double-key'] == 10.11", False),
    ("@['boolean-key'] == false", False), ("@['null-key'] == null", True), ("@['string-key'] == null", False),
    ("@['null-key'] != '666'", True), ("@['string-key'] != null", True),
    ("@['arr-empty'] == []", True), ("@['int-arr'] == [0,1,2,3,4]", True), ("@['int-arr'] == [0,1,2,3]", False),
    ("@['long-key'] < 4000000000", True), ("@['double-key'] <= 10.1", True), ("@['char-key'] < 'x'", True),
    ("@['char-key'] > 'a'", True), ("@['int-key'] >= 1", True), ("@['int-key'] > 10", False),
    ("@['string-key'] =~ /^string$/", True), ("@['string-key'] =~ /^tring$/", False),
    ("@['null-key'] =~ /^string$/", False), ("@['int-key'] =~ /^string$/", False),
    ("@['string-key'] in ['a', null, 'string']", True), ("@['string-key'] in ['a', null]", False),
    ("@['null-key'] in ['a', null]", True), ("@['string-arr'] in ['a']", False),
    ("@['string-key'] nin ['a', null]", True), ("@['null-key'] nin ['a', null]", False),
    ("@['string-arr'] nin ['a']", True),
    ("@['string-arr'] size 5", True), ("@['string-key'] size 6", True), ("@['int-key'] size 6", False),
    ("@['null-key'] size 6", False),
    ("@['string-arr'] subsetof ['a', 'b', 'c', 'd', 'e', 'f', 'g']", True),
    ("@['string-arr'] subsetof ['e', 'd', 'b', 'c', 'a']", True), ("@['string-arr'] subsetof ['a', 'b']", False),
    ("@['string-arr'] anyof ['z', 'b']", True), ("@['string-arr'] anyof ['x', 'y']", False),
    ("@['string-arr'] noneof ['a', 'z']", False), ("@['string-arr'] noneof ['x', 'y', 'z']", True),
    ("@['string-key']", True), ("@['missing-key']", False), ("!@['missing-key']", True),
    ("@['string-key'] empty false", True), ("@['string-key-empty'] empty true", True),
    ("@['arr-empty'] empty true", True), ("@['int-arr'] empty false", True),
    ("@['null-key'] empty true", False), ("@['null-key'] empty false", False),
])
def test_jayway_filter_operators(expression, expected):
    assert read(f"$[?({expression})]", [KEYS]) == ([KEYS] if expected else [])
