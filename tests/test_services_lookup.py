"""The lookup services (SimpleKeyValueLookupService, SimpleCsvFileLookupService,
CSVRecordLookupService): cases from NiFi's TestSimpleKeyValueLookupService,
TestSimpleCsvFileLookupService and TestCSVRecordLookupService, then the files that must stop a
service from enabling and a file that changes while the service is enabled."""

from __future__ import annotations

import os

import pytest

from flowactors.engine.services import ServiceHost
from flowactors.sdk.services import ServiceEnableError, ServiceNode
from flowactors.services import CSVRecordLookupService, SimpleCsvFileLookupService, SimpleKeyValueLookupService
from flowactors.services.lookup import LookupFailureError
from flowactors.testing import enable_service

#: NiFi's test.csv
TEST_CSV = b'"key","value","created_at"\n"property.1","this is property 1","2017-04-01"\n' \
           b'"property.2","this is property 2","2017-04-02"\n'
#: NiFi's test_sep_escape_comment.csv
SEP_ESCAPE_COMMENT = b'"key"|"value"|"created_at"\n# This is a remarkably nice comment\n' \
                     b'"my_key"|"my_value with an escaped %|."|"2020-07-30"\n'


@pytest.fixture
def csv_file(tmp_path):
    def write(content: bytes, name: str = "lookup.csv") -> str:
        path = tmp_path / name
        path.write_bytes(content)
        return str(path)
    return write


def simple(path: str, **properties):
    return enable_service(SimpleCsvFileLookupService, {"CSV File": path, "CSV Format": "RFC4180",
                                                       "Lookup Key Column": "key", "Lookup Value Column": "value",
                                                       **properties})


def test_key_value_lookup_finds_the_dynamic_properties():
    service = enable_service(SimpleKeyValueLookupService, {"key1": "value1", "key2": "value2"})
    assert service.lookup({"key": "key1"}) == "value1"
    assert service.lookup({"key": "key2"}) == "value2"
    assert service.lookup({"key": "key3"}) is None
    assert service.required_keys() == {"key"}


def test_key_value_lookup_reads_a_key_that_is_not_text_as_nifi_writes_it():
    service = enable_service(SimpleKeyValueLookupService, {"true": "yes", "5": "five", "1.5": "one and a half"})
    assert [service.lookup({"key": k}) for k in (True, 5, 1.5, None)] == ["yes", "five", "one and a half", None]
    assert service.lookup({}) is None


def test_csv_file_lookup(csv_file):
    service = simple(csv_file(TEST_CSV))
    assert service.lookup({"key": "property.1"}) == "this is property 1"
    assert service.lookup({"key": "property.2"}) == "this is property 2"
    assert service.lookup({"key": "property.3"}) is None


def test_csv_file_lookup_decodes_its_character_set(csv_file):
    # NiFi's test_Windows-31J.csv (Python calls Java's Windows-31J cp932)
    path = csv_file(b'"key","value","created_at"\n"property.1","this is property \x82\x50","2017-04-01"\n')
    assert simple(path, **{"Character Set": "cp932"}).lookup({"key": "property.1"}) == "this is property \uff11"


def test_csv_file_lookup_with_a_custom_separator_quote_escape_and_comment(csv_file):
    service = simple(csv_file(SEP_ESCAPE_COMMENT), **{
        "CSV Format": "Custom Format", "Value Separator": "|", "Quote Character": '"', "Escape Character": "%",
        "Comment Marker": "#", "Quote Mode": "Quote All Values"})
    assert service.lookup({"key": "my_key"}) == "my_value with an escaped |."


def test_the_predefined_formats_split_as_commons_csv_does(csv_file):
    tabs = csv_file(b"key\tvalue\n a \t tab separated \n")
    assert simple(tabs, **{"CSV Format": "Tab-Delimited"}).lookup({"key": "a"}) == "tab separated"
    informix = csv_file(b"key|value\nb|pipe \\| escaped\n")
    assert simple(informix, **{"CSV Format": "Informix Unload"}).lookup({"key": "b"}) == "pipe | escaped"
    custom_trimmed = csv_file(b"key ; value\n c ; padded \n")
    assert simple(custom_trimmed, **{"CSV Format": "Custom Format", "Value Separator": ";"}).lookup(
        {"key": "c"}) == "padded"


def test_a_record_lookup_gives_the_whole_row_without_its_key(csv_file):
    service = enable_service(CSVRecordLookupService, {"CSV File": csv_file(TEST_CSV), "CSV Format": "RFC4180",
                                                      "Lookup Key Column": "key"})
    assert service.lookup({"key": "property.1"}) == {"value": "this is property 1", "created_at": "2017-04-01"}
    assert service.lookup({"key": "property.2"}) == {"value": "this is property 2", "created_at": "2017-04-02"}
    assert service.lookup({"key": "property.3"}) is None


def test_a_record_lookup_with_a_custom_format(csv_file):
    service = enable_service(CSVRecordLookupService, {
        "CSV File": csv_file(SEP_ESCAPE_COMMENT), "Lookup Key Column": "key", "CSV Format": "Custom Format",
        "Value Separator": "|", "Escape Character": "%", "Comment Marker": "#"})
    assert service.lookup({"key": "my_key"})["value"] == "my_value with an escaped |."


def test_disabling_forgets_the_table(csv_file):
    node = ServiceNode("csv", SimpleCsvFileLookupService, {"CSV File": csv_file(TEST_CSV), "Lookup Key Column": "key",
                                                           "Lookup Value Column": "value"})
    host = ServiceHost([node], [node])
    host.enable()
    service = host.instances["csv"]
    assert service.is_loaded
    host.disable()
    assert not service.is_loaded


def test_duplicate_keys_keep_the_last_unless_refused(csv_file):
    path = csv_file(b"key,value\na,first\na,second\n")
    assert simple(path).lookup({"key": "a"}) == "second"
    with pytest.raises(ServiceEnableError) as caught:
        simple(path, **{"Ignore Duplicates": "false"})
    assert f"CSV File '{path}', line 3: the lookup key 'a' is there twice" in str(caught.value)


@pytest.mark.parametrize("content, problem", [
    (b"", "is empty: its first line must name the columns"),
    (b"id,value\n1,x\n", "has no column 'key' (its columns: id, value)"),
    (b"key,other\n1,x\n", "has no column 'value' (its columns: key, other)"),
    (b"key,value\na,1\nb\n", "line 3: the record has 1 values, but column 'value' is value 2"),
    (b"key,value\na,1\n ,2\n", "line 3: the lookup key (column 'key') is empty"),
    (b"key,value\n\xff,1\n", "is not UTF-8 text: byte 10 (b'\\xff') cannot be decoded"),
])
def test_a_malformed_file_stops_the_service_from_enabling(csv_file, content, problem):
    path = csv_file(content)
    with pytest.raises(ServiceEnableError) as caught:
        simple(path)
    message = str(caught.value)
    assert message.startswith("controller service 'SimpleCsvFileLookupService' (SimpleCsvFileLookupService) "
                              "could not be enabled: CSV File")
    assert problem in message and path in message


def test_a_missing_file_stops_the_service_from_enabling(tmp_path):
    missing = str(tmp_path / "nowhere.csv")
    with pytest.raises(ServiceEnableError) as caught:
        enable_service(CSVRecordLookupService, {"CSV File": missing, "Lookup Key Column": "key"})
    assert str(caught.value) == (f"controller service 'CSVRecordLookupService' (CSVRecordLookupService) could not be "
                                 f"enabled: cannot read CSV File '{missing}': No such file or directory")


def test_properties_are_validated_before_enabling(csv_file):
    with pytest.raises(ValueError) as caught:
        simple(csv_file(TEST_CSV), **{"Character Set": "no-such-set", "Value Separator": "ab"})
    assert "'no-such-set' is not a character set Python knows" in str(caught.value)
    assert "property 'Value Separator': must be a single character" in str(caught.value)


def test_a_changed_file_is_read_again(csv_file):
    path = csv_file(b"key,value\na,1\n")
    service = simple(path)
    service.RELOAD_CHECK_SECONDS = 3600.0
    with open(path, "wb") as file:
        file.write(b"key,value\na,changed\nb,new\n")
    assert service.lookup({"key": "a"}) == "1"   # not looked at again within the interval
    service.RELOAD_CHECK_SECONDS = 0.0
    assert service.lookup({"key": "a"}) == "changed"
    assert service.lookup({"key": "b"}) == "new"


def test_a_file_that_changes_into_a_bad_one_fails_the_lookup_and_keeps_the_old_entries(csv_file):
    path = csv_file(b"key,value\na,1\n")
    service = simple(path)
    service.RELOAD_CHECK_SECONDS = 0.0
    with open(path, "wb") as file:
        file.write(b"key,value\na,1\n,2\n")
    with pytest.raises(LookupFailureError) as caught:
        service.lookup({"key": "a"})
    assert "the CSV File changed and could not be read again" in str(caught.value)
    assert "line 3: the lookup key (column 'key') is empty" in str(caught.value)
    assert service.lookup({"key": "a"}) == "1"   # until it changes again
    os.remove(path)
    with pytest.raises(LookupFailureError, match="No such file or directory"):
        service.lookup({"key": "a"})
