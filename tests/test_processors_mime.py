"""IdentifyMimeType: NiFi's TestIdentifyMimeType cases (its file types, made here with the same
leading bytes) with the preset table and custom configurations replacing or merged with it, on
the in-process and stateless engines."""

from __future__ import annotations

import bz2
import gzip
import io
import tarfile
import zipfile

import pytest

from flowactors.driver.nifi_export import flow_from_nifi
from flowactors.processors import IdentifyMimeType
from flowactors.processors.mime_table import MimeTable, parse_config
from flowactors.testing import ProcessorRunner
from nifi_flows import STANDARD, group, processor, snapshot


def _zip(*names: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name in names:
            archive.writestr(name, "Manifest-Version: 1.0\n")
    return out.getvalue()


def _tar(name: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        data = b"key=value\n"
        info = tarfile.TarInfo(name)
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


XHTML = (b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" '
         b'"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">\n<html xmlns="http://www.w3.org/1999/xhtml">'
         b"<head><title>t</title></head><body/></html>\n")
FLOWFILE_V3 = b"NiFiFF3\x00\x01\x00\x08filename\x00\x05a.txt" + b"\x00" * 7 + b"\x05hello"

#: NiFi's test files: name -> (content, preset mime.type, mime.extension, mime.charset)
FILES = {
    "1.7z": (b"7z\xbc\xaf\x27\x1c\x00\x04" + bytes(range(40)), "application/x-7z-compressed", ".7z", None),
    "1.accdb": (b"\x00\x01\x00\x00Standard ACE DB\x00" + b"\x00" * 64, "application/x-msaccess", ".accdb", None),
    "1.txt": (b"This is a test file for IdentifyMimeType.\n", "text/plain", ".txt", "ISO-8859-1"),
    "1.csv": (b"id,name\n1,Ann\n2,Bob\n", "text/csv", ".csv", "ISO-8859-1"),
    "1.txt.bz2": (bz2.compress(b"hello\n"), "application/x-bzip2", ".bz2", None),
    "1.txt.gz": (gzip.compress(b"hello\n"), "application/gzip", ".gz", None),
    "1.zip": (_zip("a.txt"), "application/zip", ".zip", None),
    "1.pdf": (b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\nstream\n\x78\x9c\x03\x00\x00\x00\x00\x01", "application/pdf",
              ".pdf", None),
    "1.tar": (_tar("a.txt"), "application/x-tar", ".tar", None),
    "1.tar.gz": (gzip.compress(_tar("a.txt")), "application/gzip", ".gz", None),
    "1.jar": (_zip("META-INF/MANIFEST.MF", "a/B.class"), "application/java-archive", ".jar", None),
    "1.xml": (b'<?xml version="1.0" encoding="UTF-8"?>\n<root><a>1</a></root>\n', "application/xml", ".xml", None),
    "1.xhtml": (XHTML, "application/xhtml+xml", ".xhtml", None),
    "flowfilev3": (FLOWFILE_V3, "application/flowfile-v3", "", None),
    "flowfilev3WithXhtml": (FLOWFILE_V3 + XHTML, "application/flowfile-v3", "", None),
    "flowfilev1.tar": (_tar("flowfile.attributes"), "application/flowfile-v1", "", None),
    "fake.csv": (b"this is not really comma separated\n", "text/csv", ".csv", "ISO-8859-1"),
    "charset-utf-8.txt": ("Grüße aus Köln ✓\n".encode(), "text/plain", ".txt", "UTF-8"),
    "bgBannerFoot.png": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 20, "image/png", ".png", None),
    "blueBtnBg.jpg": (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 20, "image/jpeg", ".jpg", None),
    "grid.gif": (b"GIF89a\x10\x00\x10\x00\x80\x00\x00" + b"\x00" * 20, "image/gif", ".gif", None),
    "2.custom": (b"abcd is how this file starts\n", "text/plain", ".txt", "ISO-8859-1"),
}
BINARY = {"1.7z", "1.accdb", "1.txt.bz2", "1.txt.gz", "1.zip", "1.pdf", "1.tar", "1.tar.gz", "1.jar", "flowfilev3",
          "flowfilev3WithXhtml", "flowfilev1.tar", "blueBtnBg.jpg", "grid.gif", "bgBannerFoot.png"}

#: NiFi's CONFIG_BODY: a custom type and a second glob for image/png
CONFIG_BODY = r"""<?xml version="1.0" encoding="UTF-8"?>
<mime-info>
  <mime-type type="custom/abcd">
    <magic priority="50"><match value="abcd" type="string" offset="0"/></magic>
    <glob pattern="*.abcd" />
  </mime-type>
  <mime-type type="image/png">
    <acronym>PNG</acronym>
    <magic priority="50"><match value="\x89PNG\x0d\x0a\x1a\x0a" type="string" offset="0"/></magic>
    <glob pattern="*.customPng"/>
  </mime-type>
</mime-info>"""
#: shaped as NiFi's .customConfig.xml: my/ types of higher priority, with Tika's undeclared tika: prefix
CONFIG_FILE = r"""<?xml version="1.0" encoding="UTF-8"?>
<mime-info>
  <mime-type type="my/gif"><tika:link>http://en.wikipedia.org/wiki/Gif</tika:link>
    <magic priority="80"><match value="GIF87a" type="string" offset="0"/><match value="GIF89a" type="string"
      offset="0"/></magic><glob pattern="*.mygif"/></mime-type>
  <mime-type type="my/png"><magic priority="80"><match value="\x89PNG\x0d\x0a\x1a\x0a" type="string" offset="0"/>
    </magic><glob pattern="*.mypng"/></mime-type>
  <mime-type type="my/jpeg"><magic priority="80"><match value="0xffd8ff" type="string" offset="0"/></magic>
    <glob pattern="*.myjpg"/></mime-type>
</mime-info>"""


pytestmark = pytest.mark.usefixtures("engine")   # each test on both in-process engines (conftest)


def identify(properties: dict, names=tuple(FILES)) -> dict[str, dict[str, str]]:
    runner = ProcessorRunner(IdentifyMimeType, properties)
    for name in names:
        runner.enqueue(FILES[name][0], {"filename": name})
    runner.run()
    assert runner.input_count == 0
    return {f.attributes["filename"]: f.attributes for f in runner.output("success")}


def test_preset_types_extensions_and_charsets():                                    # testFiles
    found = identify({})
    for name, (_, kind, extension, charset) in FILES.items():
        attributes = found[name]
        assert (attributes["mime.type"], attributes["mime.extension"], attributes.get("mime.charset")) == \
            (kind, extension, charset), name


def test_without_the_filename_a_text_is_plain():                                    # testIgnoreFileName
    found = identify({"Use Filename In Detection": "false"}, ["fake.csv", "1.jar", "1.txt"])
    assert {n: (a["mime.type"], a["mime.extension"]) for n, a in found.items()} == {
        "fake.csv": ("text/plain", ".txt"), "1.txt": ("text/plain", ".txt"),
        "1.jar": ("application/java-archive", ".jar")}   # the jar by its manifest entry


def expected_replaced(custom: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """NiFi's expectations with Replace: what the custom types find, text/plain for the rest of the
    text (with no extension: the configuration knows no text/plain), octet-stream otherwise."""
    return {name: custom.get(name, ("application/octet-stream", "") if name in BINARY else ("text/plain", ""))
            for name in FILES}


@pytest.mark.parametrize("config, custom", [
    (CONFIG_BODY, {"2.custom": ("custom/abcd", ".abcd"), "bgBannerFoot.png": ("image/png", ".customPng")}),
    (CONFIG_FILE, {"bgBannerFoot.png": ("my/png", ".mypng"), "blueBtnBg.jpg": ("my/jpeg", ".myjpg"),
                   "grid.gif": ("my/gif", ".mygif")}),
])
def test_replace_uses_the_custom_configuration_alone(config, custom, tmp_path):   # testReplaceWithConfigBody/File
    for value in (config, str(tmp_path / "custom.xml")):
        (tmp_path / "custom.xml").write_text(config)
        found = identify({"Config Strategy": "Replace", "Custom MIME Configuration": value})
        assert {n: (a["mime.type"], a["mime.extension"]) for n, a in found.items()} == expected_replaced(custom)


@pytest.mark.parametrize("config, custom", [
    (CONFIG_BODY, {"2.custom": ("custom/abcd", ".abcd"), "bgBannerFoot.png": ("image/png", ".customPng")}),
    (CONFIG_FILE, {"bgBannerFoot.png": ("my/png", ".mypng"), "blueBtnBg.jpg": ("my/jpeg", ".myjpg"),
                   "grid.gif": ("my/gif", ".mygif")}),
])
def test_merge_puts_the_custom_configuration_first(config, custom):                 # testMergeWithConfigBody/File
    found = identify({"Config Strategy": "Merge", "Custom MIME Configuration": config})
    expected = {name: custom.get(name, (kind, extension)) for name, (_, kind, extension, _) in FILES.items()}
    assert {n: (a["mime.type"], a["mime.extension"]) for n, a in found.items()} == expected


@pytest.mark.parametrize("properties, problem", [
    ({"Config Strategy": "Replace"}, "Custom MIME Configuration must be set with Config Strategy Replace"),
    ({"Config Strategy": "Replace", "Custom MIME Configuration": "gibberish"},       # testInvalidCustomConfiguration
     "'gibberish' is neither a readable file nor a Tika MIME configuration"),
    ({"Config Strategy": "Merge", "Custom MIME Configuration": "<mime-info><mime-type type='a/b'><magic>"
      "<match value='1' type='big32' offset='0'/></magic></mime-type></mime-info>"}, "match type 'big32' is not"),
    ({"Config Strategy": "Merge", "Custom MIME Configuration": "<types/>"}, "its root element must be <mime-info>"),
    ({"Config Strategy": "Preset", "Custom MIME Configuration": CONFIG_BODY}, "Config Strategy Preset ignores it"),
])
def test_configuration_problems(properties, problem):
    problems = IdentifyMimeType.validate_properties(properties)
    assert len(problems) == 1 and problem in problems[0] and "\n" not in problems[0]


def test_nifi_1_property_names_map_to_nifi_2s():                                    # testMigrateProperties
    names = IdentifyMimeType.NIFI_PROPERTY_NAMES
    assert names["use-filename-in-detection"] == "Use Filename In Detection"
    assert names["config-strategy"] == "Config Strategy"
    assert names["config-file"] == names["config-body"] == "Custom MIME Configuration"


def test_a_nifi_1_configuration_without_a_strategy_is_replace():                  # testMigration (migrateProperties)
    """NiFi 1 had config-file / config-body and no Config Strategy; NiFi 2's migration makes such a
    flow Replace (what NiFi 1 did), and so does loading its export here."""
    exported = processor("root", "identify", STANDARD + "IdentifyMimeType", {
        "use-filename-in-detection": "true", "config-file": None, "config-body": CONFIG_BODY},
        auto_terminate=("success",))
    [loaded] = flow_from_nifi(snapshot(group("root", "m", None, None, processors=[exported]), {})).processors.values()
    assert loaded.properties.get("Config Strategy") is None and IdentifyMimeType.validate_properties(
        loaded.properties) == []
    found = identify(dict(loaded.properties))
    expected = expected_replaced({"2.custom": ("custom/abcd", ".abcd"), "bgBannerFoot.png": ("image/png", ".customPng")})
    assert {n: (a["mime.type"], a["mime.extension"]) for n, a in found.items()} == expected


def test_nested_matches_ranges_and_escapes():
    table = MimeTable(parse_config(r"""<mime-info><mime-type type="a/inner"><glob pattern="*.in"/>
        <magic><match value="\101\x42" type="string" offset="2"><match value="end" type="string" offset="4:10"/>
        </match></magic></mime-type></mime-info>"""))
    assert table.by_magic(b"..AB.....end") == "a/inner"     # octal \101 is A; "end" starts within 4..10
    assert table.by_magic(b"..AB........end") is None       # "end" starts past 10
    assert table.by_magic(b".AB......end") is None          # AB not at offset 2
    assert table.extension("a/inner") == ".in"
