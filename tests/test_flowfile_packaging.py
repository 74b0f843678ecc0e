"""FlowFile Stream v3 against vectors assembled by hand from the documented layout
(docs/formats/flowfile-stream-v3.md), never with the module's own writer."""

from __future__ import annotations

import io
import struct

import pytest

from flowactors.processors.packaging import FlowFileStreamReader, PackageError, write_flowfile

MAGIC = b"NiFiFF3"


def short(data: bytes) -> bytes:
    """A field whose length fits in 2 bytes."""
    assert len(data) < 0xFFFF
    return struct.pack(">H", len(data)) + data


def long(data: bytes) -> bytes:
    """A field written with the escape: FF FF, then the length in 4 bytes."""
    return b"\xff\xff" + struct.pack(">I", len(data)) + data


def content(data: bytes) -> bytes:
    return struct.pack(">q", len(data)) + data


class Unseekable(io.RawIOBase):
    """A stream that can only be read, a few bytes at a time (as a socket would hand them)."""

    def __init__(self, data: bytes, step: int = 5):
        self._data = io.BytesIO(data)
        self._step = step

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        chunk = self._data.read(min(len(buffer), self._step))
        buffer[:len(chunk)] = chunk
        return len(chunk)


def written(attributes: dict, data: bytes) -> bytes:
    out = io.BytesIO()
    write_flowfile(out, attributes, io.BytesIO(data), len(data))
    return out.getvalue()


def read_all(stream) -> list[tuple[dict, int, bytes]]:
    reader = FlowFileStreamReader(stream)
    return [(p.attributes, p.offset, reader.read()) for p in reader]


# ------------------------------------------------------------------------ writer
def test_writer_matches_the_documented_example_byte_for_byte():
    # the example of docs/formats/flowfile-stream-v3.md, as hex
    expected = bytes.fromhex(
        "4e 69 46 69 46 46 33"              # NiFiFF3
        "00 02"                             # 2 attributes
        "00 08 66 69 6c 65 6e 61 6d 65"     # "filename"
        "00 05 61 2e 74 78 74"              # "a.txt"
        "00 04 70 61 74 68"                 # "path"
        "00 02 2e 2f"                       # "./"
        "00 00 00 00 00 00 00 02"           # 2 bytes of content
        "68 69")                            # "hi"
    assert written({"filename": "a.txt", "path": "./"}, b"hi") == expected


def test_writer_output_equals_the_hand_built_bytes():
    value = "é東" * 40_000  # 200,000 UTF-8 bytes: a length written with the escape
    attributes = {"uuid": "0000", "grüße": value, "empty": ""}
    expected = (MAGIC + struct.pack(">H", 3)
                + short(b"uuid") + short(b"0000")
                + short("grüße".encode()) + long(value.encode())
                + short(b"empty") + short(b"")
                + content(b"\x00\x01\xff" * 1000))
    assert written(attributes, b"\x00\x01\xff" * 1000) == expected


@pytest.mark.parametrize("length, prefix", [
    (65_534, b"\xff\xfe"),                       # the longest a 2-byte length holds
    (65_535, b"\xff\xff\x00\x00\xff\xff"),       # FF FF is the escape: 65,535 itself needs the long form
    (65_536, b"\xff\xff\x00\x01\x00\x00"),
])
def test_writer_switches_to_the_long_length_at_65535(length, prefix):
    data = written({"k": "v" * length}, b"")
    assert data[:len(MAGIC) + 2 + 3] == MAGIC + b"\x00\x01" + b"\x00\x01k"
    assert data[len(MAGIC) + 5:len(MAGIC) + 5 + len(prefix)] == prefix
    assert len(data) == len(MAGIC) + 5 + len(prefix) + length + 8


def test_writer_refuses_a_content_shorter_than_its_size():
    with pytest.raises(PackageError, match="ended after 3 of its 10 bytes"):
        write_flowfile(io.BytesIO(), {"a": "b"}, io.BytesIO(b"abc"), 10)


# ------------------------------------------------------------------------ reader
LONG_VALUE = "x" * 70_000 + "é"
HAND_BUILT = [
    ({"filename": "first.txt", "note": LONG_VALUE}, b"first content"),
    ({"näme": "Grüße aus 東京 🚀", "uuid": "1234"}, b""),
    ({"filename": "big.bin"}, bytes(range(256)) * 5000),  # 1.28 MB, more than a chunk
]
SMALL = [({"a": "1"}, b"xyz"), ({"bb": "", "c": "é"}, b""), ({"d": "4"}, b"0123456789")]


def records(flowfiles) -> list[bytes]:
    out = []
    for attributes, data in flowfiles:
        record = MAGIC + struct.pack(">H", len(attributes))
        for key, value in attributes.items():
            record += short(key.encode())
            encoded = value.encode()
            record += long(encoded) if len(encoded) >= 0xFFFF else short(encoded)
        out.append(record + content(data))
    return out


def hand_built() -> bytes:
    return b"".join(records(HAND_BUILT))


@pytest.mark.parametrize("seekable", [True, False])
def test_reader_reads_a_hand_built_stream_exactly(seekable):
    data = hand_built()
    stream = io.BytesIO(data) if seekable else io.BufferedReader(Unseekable(data, step=4096))
    got = read_all(stream)
    assert [(a, c) for a, _, c in got] == HAND_BUILT
    for _, offset, body in got:  # the offsets point at each content in the stream
        assert data[offset:offset + len(body)] == body


class Counting(io.BytesIO):
    """A seekable stream that counts the bytes read from it and the largest read asked for."""

    def __init__(self, data: bytes):
        super().__init__(data)
        self.taken = self.asked = 0

    def read(self, size=-1):
        chunk = super().read(size)
        self.taken += len(chunk)
        self.asked = max(self.asked, size if size is not None and size >= 0 else len(chunk))
        return chunk


@pytest.mark.parametrize("seekable", [True, False])
def test_unread_contents_are_skipped(seekable):
    data = hand_built()
    stream = Counting(data) if seekable else io.BufferedReader(Unseekable(data, step=4096))
    reader = FlowFileStreamReader(stream)
    headers = list(reader)
    assert [p.attributes for p in headers] == [a for a, _ in HAND_BUILT]
    assert [p.size for p in headers] == [len(c) for _, c in HAND_BUILT]
    if seekable:   # skipped by seeking: no byte of any content was read
        assert stream.taken == len(data) - sum(len(c) for _, c in HAND_BUILT)


def test_reader_reads_a_content_in_pieces():
    reader = FlowFileStreamReader(io.BytesIO(hand_built()))
    next(iter(reader))
    assert reader.read(5) == b"first" and reader.read(100) == b" content" and reader.read() == b""


def test_an_empty_stream_holds_no_flowfile():
    assert read_all(io.BytesIO(b"")) == []


def test_zero_attributes_are_read():
    assert read_all(io.BytesIO(MAGIC + b"\x00\x00" + content(b"abc"))) == [({}, 17, b"abc")]


def cut_streams(flowfiles, cuts, seekable):
    """(cut, stream of the first ``cut`` bytes, how many FlowFiles end before it or None if it cuts one)."""
    parts = records(flowfiles)
    data = b"".join(parts)
    ends = [sum(map(len, parts[:i + 1])) for i in range(len(parts))]
    for cut in cuts(len(data), ends):
        stream = io.BytesIO(data[:cut]) if seekable else io.BufferedReader(Unseekable(data[:cut], step=4096))
        yield cut, stream, ends.index(cut) + 1 if cut in ends else None


def every_cut(length, ends):
    return range(1, length)


def sampled_cuts(length, ends):
    """Around the start of each record (its header) and every 997th byte elsewhere."""
    starts = [0, *ends[:-1]]
    return sorted({n for n in range(1, length) if n % 997 == 0 or any(0 <= n - s < 40 for s in starts)})


@pytest.mark.parametrize("seekable", [True, False])
@pytest.mark.parametrize("flowfiles, cuts", [(SMALL, every_cut), (HAND_BUILT, sampled_cuts)])
def test_every_truncation_is_an_error_naming_the_offset(seekable, flowfiles, cuts):
    for cut, stream, whole in cut_streams(flowfiles, cuts, seekable):
        if whole is not None:  # cut between two FlowFiles: a shorter stream, not a broken one
            assert [a for a, _, _ in read_all(stream)] == [a for a, _ in flowfiles[:whole]]
            continue
        with pytest.raises(PackageError, match=r"^FlowFile Stream v3: at byte \d+: expected .*, found ") as caught:
            read_all(stream)
        assert caught.value.offset <= cut  # where the missing field starts


def test_truncation_messages_say_what_was_expected():
    data = MAGIC + b"\x00\x01" + short(b"name") + short(b"value") + content(b"0123456789")
    cases = {
        3: "at byte 0: expected the magic header NiFiFF3 (7 bytes), found the end of the stream after 3 bytes",
        8: "at byte 7: expected the length of the number of attributes (2 bytes), found the end of the stream "
           "after 1 bytes",
        14: "at byte 11: expected the name of attribute 1 (4 bytes), found the end of the stream after 3 bytes",
        26: "at byte 22: expected the content length (8 bytes), found the end of the stream after 4 bytes",
        35: "at byte 30: expected 10 bytes of content, found the end of the stream after 5",
    }
    for cut, message in cases.items():
        with pytest.raises(PackageError) as caught:
            read_all(io.BytesIO(data[:cut]))
        assert str(caught.value) == f"FlowFile Stream v3: {message}"
        assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("seekable", [True, False])
def test_bad_magic_is_an_error(seekable):
    good = MAGIC + b"\x00\x01" + short(b"a") + short(b"b") + content(b"xyz")
    for data, offset in [(b"NiFiFF2" + good[7:], 0), (b"PK\x03\x04 not a FlowFile stream", 0),
                         (good + b"NIFIFF3" + good[7:], len(good))]:
        stream = io.BytesIO(data) if seekable else io.BufferedReader(Unseekable(data))
        with pytest.raises(PackageError, match=f"at byte {offset}: expected the magic header NiFiFF3, found b'"):
            read_all(stream)


def test_impossible_lengths_are_errors_before_anything_is_read():
    negative = MAGIC + b"\x00\x01" + short(b"a") + short(b"b") + struct.pack(">q", -1)
    with pytest.raises(PackageError, match="at byte 15: expected a content length of 0 or more, found -1"):
        read_all(io.BytesIO(negative))
    too_long = MAGIC + b"\x00\x01" + b"\xff\xff" + struct.pack(">I", 2**31) + b"a"
    with pytest.raises(PackageError, match=r"at byte 11: expected a length of the name of attribute 1 below 2\^31"):
        read_all(io.BytesIO(too_long))
    claims_a_lot = MAGIC + b"\x00\x01" + b"\xff\xff" + struct.pack(">I", 2**31 - 1) + b"a"
    stream = Counting(claims_a_lot)
    with pytest.raises(PackageError, match="found the end of the stream after 1 bytes"):
        read_all(stream)  # the stream is 2 GB short: refused without reading
    assert stream.asked < 1 << 20   # no read was asked for the 2 GB the length claims
