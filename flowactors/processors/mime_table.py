"""MIME type detection from a content's leading bytes and its file name, on a table written in
Apache Tika's MIME configuration format (``<mime-info>``), as NiFi's IdentifyMimeType reads a
custom one: magic byte matches with priorities, glob patterns (the first ``*.ext`` gives the
extension) and ``sub-class-of`` relations. Not public API; IdentifyMimeType (``mime``) uses it.

Why a table of our own and not a library: the names must be Tika's (``application/gzip``,
``application/x-7z-compressed``, ``text/csv`` for a text named ``*.csv``), a user's Tika
configuration must read as NiFi reads it (Replace or Merge), and libmagic's names differ.
"""

from __future__ import annotations

import fnmatch
import re
import xml.parsers.expat
from dataclasses import dataclass, field

OCTET_STREAM, TEXT_PLAIN, XML = "application/octet-stream", "text/plain", "application/xml"
#: how many leading bytes detection reads (the widest magic window below is 8 KB)
PREFIX = 65536

#: the preset table: the common types, with Tika's names, magic and globs (and NiFi's FlowFile types)
PRESET = r"""<mime-info>
  <mime-type type="application/flowfile-v3"><magic priority="70"><match value="NiFiFF3" type="string" offset="0"/>
    </magic></mime-type>
  <mime-type type="application/flowfile-v1"><sub-class-of type="application/x-tar"/>
    <magic><match value="flowfile.attributes" type="string" offset="0"/></magic></mime-type>
  <mime-type type="application/x-7z-compressed"><glob pattern="*.7z"/>
    <magic><match value="7z\xbc\xaf\x27\x1c" type="string" offset="0"/></magic></mime-type>
  <mime-type type="application/x-msaccess"><glob pattern="*.accdb"/><glob pattern="*.mdb"/>
    <magic><match value="\x00\x01\x00\x00Standard ACE DB" type="string" offset="0"/>
      <match value="\x00\x01\x00\x00Standard Jet DB" type="string" offset="0"/></magic></mime-type>
  <mime-type type="application/x-bzip2"><glob pattern="*.bz2"/><glob pattern="*.tbz2"/>
    <magic><match value="BZh" type="string" offset="0"/></magic></mime-type>
  <mime-type type="application/gzip"><glob pattern="*.gz"/><glob pattern="*.tgz"/>
    <magic><match value="\x1f\x8b" type="string" offset="0"/></magic></mime-type>
  <mime-type type="application/x-xz"><glob pattern="*.xz"/>
    <magic><match value="\xfd7zXZ\x00" type="string" offset="0"/></magic></mime-type>
  <mime-type type="application/zstd"><glob pattern="*.zst"/>
    <magic><match value="\x28\xb5\x2f\xfd" type="string" offset="0"/></magic></mime-type>
  <mime-type type="application/zip"><glob pattern="*.zip"/>
    <magic priority="40"><match value="PK\x03\x04" type="string" offset="0"/>
      <match value="PK\x05\x06" type="string" offset="0"/></magic></mime-type>
  <mime-type type="application/java-archive"><sub-class-of type="application/zip"/><glob pattern="*.jar"/>
    <magic><match value="PK\x03\x04" type="string" offset="0">
      <match value="META-INF/" type="string" offset="0:1024"/></match></magic></mime-type>
  <mime-type type="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet">
    <sub-class-of type="application/zip"/><glob pattern="*.xlsx"/>
    <magic priority="60"><match value="PK\x03\x04" type="string" offset="0">
      <match value="xl/" type="string" offset="30:4096"/></match></magic></mime-type>
  <mime-type type="application/vnd.openxmlformats-officedocument.wordprocessingml.document">
    <sub-class-of type="application/zip"/><glob pattern="*.docx"/>
    <magic priority="60"><match value="PK\x03\x04" type="string" offset="0">
      <match value="word/" type="string" offset="30:4096"/></match></magic></mime-type>
  <mime-type type="application/vnd.openxmlformats-officedocument.presentationml.presentation">
    <sub-class-of type="application/zip"/><glob pattern="*.pptx"/>
    <magic priority="60"><match value="PK\x03\x04" type="string" offset="0">
      <match value="ppt/" type="string" offset="30:4096"/></match></magic></mime-type>
  <mime-type type="application/pdf"><glob pattern="*.pdf"/>
    <magic><match value="%PDF-" type="string" offset="0"/></magic></mime-type>
  <mime-type type="application/x-tar"><glob pattern="*.tar"/>
    <magic><match value="ustar" type="string" offset="257"/></magic></mime-type>
  <mime-type type="application/xml"><glob pattern="*.xml"/><glob pattern="*.xsl"/><glob pattern="*.xsd"/>
    <magic><match value="&lt;?xml" type="string" offset="0"/>
      <match value="\xef\xbb\xbf&lt;?xml" type="string" offset="0"/></magic></mime-type>
  <mime-type type="application/xhtml+xml"><sub-class-of type="application/xml"/>
    <glob pattern="*.xhtml"/><glob pattern="*.xht"/>
    <magic><match value="&lt;html xmlns=&quot;http://www.w3.org/1999/xhtml&quot;" type="string" offset="0:8192"/>
    </magic></mime-type>
  <mime-type type="text/html"><glob pattern="*.html"/><glob pattern="*.htm"/>
    <magic priority="40"><match value="&lt;!DOCTYPE html" type="string" offset="0:64"/>
      <match value="&lt;!DOCTYPE HTML" type="string" offset="0:64"/><match value="&lt;html" type="string" offset="0:64"/>
      <match value="&lt;HTML" type="string" offset="0:64"/></magic></mime-type>
  <mime-type type="image/png"><glob pattern="*.png"/>
    <magic><match value="\x89PNG\x0d\x0a\x1a\x0a" type="string" offset="0"/></magic></mime-type>
  <mime-type type="image/jpeg"><glob pattern="*.jpg"/><glob pattern="*.jpeg"/><glob pattern="*.jpe"/>
    <magic><match value="0xffd8ff" type="string" offset="0"/></magic></mime-type>
  <mime-type type="image/gif"><glob pattern="*.gif"/>
    <magic><match value="GIF87a" type="string" offset="0"/><match value="GIF89a" type="string" offset="0"/>
    </magic></mime-type>
  <mime-type type="text/plain"><glob pattern="*.txt"/><glob pattern="*.text"/><glob pattern="*.log"/></mime-type>
  <mime-type type="text/csv"><sub-class-of type="text/plain"/><glob pattern="*.csv"/></mime-type>
  <mime-type type="text/tab-separated-values"><sub-class-of type="text/plain"/><glob pattern="*.tsv"/></mime-type>
  <mime-type type="application/json"><glob pattern="*.json"/></mime-type>
</mime-info>"""


class MimeConfigError(ValueError):
    """A MIME configuration flowactors cannot read (the message is one line saying why)."""


@dataclass
class Match:
    """Bytes ``value`` found starting anywhere from ``start`` to ``end``; with ``children``, one of
    them must match too (Tika's nested ``<match>``)."""

    value: bytes
    start: int
    end: int
    children: list["Match"] = field(default_factory=list)

    def hits(self, data: bytes) -> bool:
        position = data.find(self.value, self.start, self.end + len(self.value))
        return position >= 0 and (not self.children or any(child.hits(data) for child in self.children))


@dataclass
class MimeType:
    name: str
    globs: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    #: (priority, matches): one ``<magic>`` each; any of its matches is a hit
    magics: list[tuple[int, list[Match]]] = field(default_factory=list)

    @property
    def extension(self) -> str:
        """``.ext`` of the first ``*.ext`` glob, "" when it has none."""
        for glob in self.globs:
            if glob.startswith("*.") and not set(glob[2:]) & set("*?["):
                return glob[1:]
        return ""


_ESCAPE = re.compile(rb"\\(x[0-9a-fA-F]{2}|[0-7]{1,3}|.)", re.S)
_SIMPLE = {b"n": b"\n", b"r": b"\r", b"t": b"\t"}


def _match_value(value: str, kind: str) -> bytes:
    if kind != "string":
        raise MimeConfigError(f"match type {kind!r} is not supported (only 'string')")
    if value.startswith("0x"):
        try:
            return bytes.fromhex(value[2:])
        except ValueError:
            raise MimeConfigError(f"match value {value!r} is not hexadecimal") from None
    raw = value.encode("latin-1", errors="strict") if all(ord(c) < 256 for c in value) else value.encode("utf-8")

    def unescape(found: re.Match) -> bytes:
        code = found.group(1)
        if code[:1] == b"x":
            return bytes([int(code[1:], 16)])
        if code.isdigit():
            return bytes([int(code, 8) & 0xFF])
        return _SIMPLE.get(code, code)

    return _ESCAPE.sub(unescape, raw)


def _offsets(text: str) -> tuple[int, int]:
    try:
        start, _, end = text.partition(":")
        return int(start), int(end or start)
    except ValueError:
        raise MimeConfigError(f"match offset {text!r} is not a number or a range n:m") from None


class _Node:
    __slots__ = ("tag", "attrs", "children")

    def __init__(self, tag: str, attrs: dict[str, str]):
        self.tag, self.attrs, self.children = tag, attrs, []


def _read_tree(text: str) -> _Node:
    """The elements of a configuration, read without namespaces as Tika reads it (its files use
    ``tika:`` elements without declaring the prefix)."""
    root = _Node("", {})
    stack = [root]
    parser = xml.parsers.expat.ParserCreate()

    def start(tag: str, attrs: dict[str, str]) -> None:
        node = _Node(tag, attrs)
        stack[-1].children.append(node)
        stack.append(node)

    def entity(*_: object) -> None:
        raise MimeConfigError("entity declarations are not allowed")

    parser.StartElementHandler = start
    parser.EndElementHandler = lambda tag: stack.pop()
    parser.EntityDeclHandler = entity
    try:
        parser.Parse(text, True)
    except xml.parsers.expat.ExpatError as err:
        raise MimeConfigError(f"not XML: {err}") from None
    if len(root.children) != 1 or root.children[0].tag != "mime-info":
        raise MimeConfigError("not a Tika MIME configuration: its root element must be <mime-info>")
    return root.children[0]


def _matches(node: _Node) -> list[Match]:
    found = []
    for child in node.children:
        if child.tag != "match":
            continue
        if "mask" in child.attrs:
            raise MimeConfigError("match masks are not supported")
        start, end = _offsets(child.attrs.get("offset", "0"))
        found.append(Match(_match_value(child.attrs.get("value", ""), child.attrs.get("type", "string")), start, end,
                           _matches(child)))
    return found


def parse_config(text: str) -> list[MimeType]:
    """The types a Tika MIME configuration declares; ``MimeConfigError`` (one line) otherwise."""
    types = []
    for node in _read_tree(text).children:
        if node.tag != "mime-type" or not node.attrs.get("type"):
            continue
        kind = MimeType(node.attrs["type"].strip().lower())
        for child in node.children:
            if child.tag == "glob" and child.attrs.get("pattern"):
                kind.globs.append(child.attrs["pattern"])
            elif child.tag == "sub-class-of" and child.attrs.get("type"):
                kind.parents.append(child.attrs["type"].strip().lower())
            elif child.tag == "magic":
                try:
                    priority = int(child.attrs.get("priority", "50"))
                except ValueError:
                    raise MimeConfigError(f"magic priority {child.attrs['priority']!r} is not a number") from None
                kind.magics.append((priority, _matches(child)))
        types.append(kind)
    return types


class MimeTable:
    """Types by name (a type declared twice gets the globs and magic of both, the first's first)."""

    def __init__(self, types: list[MimeType]):
        self.types: dict[str, MimeType] = {}
        for kind in types:
            known = self.types.get(kind.name)
            if known is None:
                self.types[kind.name] = MimeType(kind.name, list(kind.globs), list(kind.parents), list(kind.magics))
            else:
                known.globs.extend(kind.globs)
                known.parents.extend(kind.parents)
                known.magics.extend(kind.magics)

    def extension(self, name: str) -> str:
        kind = self.types.get(name)
        return kind.extension if kind else ""

    def is_a(self, name: str, ancestor: str) -> bool:
        """Whether ``name`` is ``ancestor`` or a specialization of it (sub-class-of, text/* of
        text/plain, +xml of application/xml, everything of application/octet-stream)."""
        seen, pending = set(), [name]
        while pending:
            current = pending.pop()
            if current == ancestor or ancestor == OCTET_STREAM:
                return True
            if current in seen:
                continue
            seen.add(current)
            kind = self.types.get(current)
            pending.extend(kind.parents if kind else ())
            if current.startswith("text/") and current != TEXT_PLAIN:
                pending.append(TEXT_PLAIN)
            if current.endswith("+xml"):
                pending.append(XML)
        return False

    def by_magic(self, data: bytes) -> str | None:
        """The type whose magic matches with the highest priority (of several, the most specific)."""
        best: list[str] = []
        top = -1
        for kind in self.types.values():
            priority = max((p for p, matches in kind.magics if any(m.hits(data) for m in matches)), default=-1)
            if priority > top:
                best, top = [kind.name], priority
            elif priority == top and priority >= 0:
                best.append(kind.name)
        specific = [n for n in best if not any(o != n and self.is_a(o, n) for o in best)]
        return specific[0] if specific else None

    def by_name(self, filename: str) -> str | None:
        """The type of the longest glob that matches the file name, case-insensitively (``*.tar.gz``
        over ``*.gz``; of equal ones, the first declared)."""
        name = filename.lower()
        found = [(len(glob), kind.name) for kind in self.types.values() for glob in kind.globs
                 if fnmatch.fnmatchcase(name, glob.lower())]
        return max(found, key=lambda f: f[0])[1] if found else None

    def detect(self, data: bytes, filename: str | None) -> str:
        """Tika's way: the magic's type, else text/plain for text, else application/octet-stream;
        then the file name's type when it is a specialization of that (``.csv`` text is text/csv,
        a zip named ``.jar`` a Java archive)."""
        found = self.by_magic(data) or (TEXT_PLAIN if looks_like_text(data) else OCTET_STREAM)
        if filename:
            hint = self.by_name(filename)
            if hint is not None and self.is_a(hint, found):
                return hint
        return found


#: bytes that do not appear in text (controls but tab, newlines, form feed and escape)
_BINARY = bytes(set(range(32)) - {9, 10, 11, 12, 13, 27})
_BOMS = ((b"\xef\xbb\xbf", "UTF-8"), (b"\xff\xfe", "UTF-16LE"), (b"\xfe\xff", "UTF-16BE"))


def looks_like_text(data: bytes) -> bool:
    """Whether the leading bytes are text: a Unicode byte order mark, or no control byte but tab,
    newlines, form feed and escape in the first 8 KB (empty content is not text)."""
    if any(data.startswith(bom) for bom, _ in _BOMS):
        return True
    sample = data[:8192]
    return bool(sample) and sample.translate(None, _BINARY) == sample


def charset(data: bytes) -> str:
    """The character set of text: its byte order mark's; ISO-8859-1 for plain ASCII (Tika's answer,
    which NiFi's tests expect); UTF-8 when the bytes are valid UTF-8; ISO-8859-1 otherwise."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name
    if data.isascii():
        return "ISO-8859-1"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(data) - 3:   # not just a character cut at the end of the prefix read
            return "ISO-8859-1"
    return "UTF-8"
