"""CompressContent: compresses or decompresses content, streaming."""

from __future__ import annotations

import bz2
import logging
import lzma
import zlib
from typing import BinaryIO, Callable, Mapping, NamedTuple

import zstandard

from flowactors.sdk import ContentRepositoryError, ContentRepositoryFullError
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor
from flowactors.sdk.relationships import FAILURE, SUCCESS
from flowactors.processors._common import CHUNK, boolean_property, iter_chunks
log = logging.getLogger(__name__)

USE_MIME_TYPE = "use mime.type attribute"


class _Corrupt(Exception):
    """The content is not valid data of the compression format."""


class _Format(NamedTuple):
    name: str
    extension: str
    mime_type: str
    compress: Callable[[BinaryIO, BinaryIO, int], None]
    decompress: Callable[[BinaryIO, BinaryIO], None]


def _compress_with(make: Callable[[int], object]) -> Callable[[BinaryIO, BinaryIO, int], None]:
    def compress(source: BinaryIO, out: BinaryIO, level: int) -> None:
        compressor = make(level)
        for chunk in iter_chunks(source):
            out.write(compressor.compress(chunk))
        out.write(compressor.flush())
    return compress


def _zlib_step(decompressor, data: bytes, out: BinaryIO) -> bytes:
    """Feed ``data``; write what comes out (CHUNK at a time); return the bytes past the stream's end."""
    while True:
        produced = decompressor.decompress(data, CHUNK)
        out.write(produced)
        if decompressor.eof:
            return decompressor.unused_data
        data = decompressor.unconsumed_tail
        if not data and len(produced) < CHUNK:
            return b""


def _bz2_lzma_step(decompressor, data: bytes, out: BinaryIO) -> bytes:
    out.write(decompressor.decompress(data, CHUNK))
    while not decompressor.eof and not decompressor.needs_input:
        out.write(decompressor.decompress(b"", CHUNK))
    return decompressor.unused_data if decompressor.eof else b""


#: input fed to the zstd decompressor at once: it has no output limit, so small pieces bound its output
ZSTD_FEED = 16 * 1024


def _zstd_step(decompressor, data: bytes, out: BinaryIO) -> bytes:
    view = memoryview(data)
    for start in range(0, len(view), ZSTD_FEED):
        out.write(decompressor.decompress(view[start:start + ZSTD_FEED]))
        if decompressor.eof:
            return decompressor.unused_data + bytes(view[start + ZSTD_FEED:])
    return b""


def _decompress_with(make: Callable[[], object], step, kind: str,
                     multi_member: bool) -> Callable[[BinaryIO, BinaryIO], None]:
    """Stream through a decompressor, holding at most a chunk of output (zlib, bz2, lzma).

    ``multi_member``: data after the end of a stream starts another one (gzip, bzip2, xz and zstd
    allow concatenated streams). Empty content, or data that ends before its stream does, is corrupt.
    """
    def decompress(source: BinaryIO, out: BinaryIO) -> None:
        decompressor = make()
        started = False
        try:
            for chunk in iter_chunks(source):
                data = chunk
                while data:
                    if started and decompressor.eof:
                        if not multi_member:
                            raise _Corrupt(f"data after the end of the {kind} stream")
                        decompressor = make()
                    started = True
                    data = step(decompressor, data, out)
        except (zlib.error, OSError, lzma.LZMAError, EOFError, ValueError, zstandard.ZstdError) as err:
            raise _Corrupt(f"not valid {kind} data: {err}") from err
        if not started or not decompressor.eof:
            raise _Corrupt(f"the {kind} data ends before its stream does (truncated or empty)")
    return decompress


def _zstd_compress(source: BinaryIO, out: BinaryIO, level: int) -> None:
    compressor = zstandard.ZstdCompressor(level=level).compressobj()
    for chunk in iter_chunks(source):
        out.write(compressor.compress(chunk))
    out.write(compressor.flush())


_ZSTD = zstandard.ZstdDecompressor()


FORMATS: dict[str, _Format] = {f.name: f for f in (
    _Format("gzip", ".gz", "application/gzip",
            _compress_with(lambda level: zlib.compressobj(level, zlib.DEFLATED, 31)),
            _decompress_with(lambda: zlib.decompressobj(31), _zlib_step, "gzip", multi_member=True)),
    _Format("deflate", ".zlib", "application/deflate",
            _compress_with(lambda level: zlib.compressobj(level)),
            _decompress_with(zlib.decompressobj, _zlib_step, "deflate", multi_member=False)),
    _Format("bzip2", ".bz2", "application/x-bzip2",
            _compress_with(lambda level: bz2.BZ2Compressor(max(1, level))),
            _decompress_with(bz2.BZ2Decompressor, _bz2_lzma_step, "bzip2", multi_member=True)),
    _Format("xz-lzma2", ".xz", "application/x-xz",
            _compress_with(lambda level: lzma.LZMACompressor(lzma.FORMAT_XZ, preset=level)),
            _decompress_with(lambda: lzma.LZMADecompressor(lzma.FORMAT_XZ), _bz2_lzma_step, "xz",
                             multi_member=True)),
    _Format("lzma", ".lzma", "application/x-lzma",
            _compress_with(lambda level: lzma.LZMACompressor(lzma.FORMAT_ALONE, preset=level)),
            _decompress_with(lambda: lzma.LZMADecompressor(lzma.FORMAT_ALONE), _bz2_lzma_step, "lzma",
                             multi_member=False)),
    _Format("zstd", ".zst", "application/zstd", _zstd_compress,
            _decompress_with(lambda: _ZSTD.decompressobj(), _zstd_step, "zstd", multi_member=True)),
)}

#: mime.type values that name a format (for "use mime.type attribute")
MIME_TYPES: dict[str, str] = {f.mime_type: f.name for f in FORMATS.values()}
MIME_TYPES.update({"application/x-gzip": "gzip", "application/bzip2": "bzip2", "application/x-zstd": "zstd"})


class CompressContent(Processor):
    """Compresses or decompresses each FlowFile's content, streaming it chunk by chunk.

    Formats: gzip, deflate (zlib), bzip2, xz-lzma2, lzma and zstd; with "use mime.type attribute"
    (decompress only) the format is the one the FlowFile's ``mime.type`` names - a FlowFile
    without mime.type goes to failure, one whose mime.type names no format goes to success
    unchanged (as NiFi). Compression Level 0-9 (zstd takes it as its own level, 0 meaning zstd's
    default). Compressing sets ``mime.type`` to the format's type; decompressing removes it. With
    Update Filename the format's extension (.gz, .zlib, .bz2, .xz, .lzma, .zst) is added when
    compressing and removed when decompressing. Content that is not valid data of the format
    (corrupt or truncated) goes to failure, unchanged. Provenance: CONTENT_MODIFIED (from the
    session).
    """

    description = "Compresses or decompresses FlowFile content"
    properties = (
        PropertyDescriptor("Mode", "Whether to compress or decompress", required=True, default="compress",
                           allowable_values=("compress", "decompress")),
        PropertyDescriptor("Compression Format", "The format to compress to or decompress from", required=True,
                           default=USE_MIME_TYPE, allowable_values=(USE_MIME_TYPE, *FORMATS)),
        PropertyDescriptor("Compression Level", "0 (fastest) to 9 (smallest); compress only", required=True,
                           default="1", allowable_values=tuple(str(i) for i in range(10))),
        boolean_property("Update Filename", False, "Whether to add the format's extension to the filename when "
                         "compressing and remove it when decompressing"),
    )
    relationships = (SUCCESS, FAILURE)

    def custom_validate(self, values: Mapping[str, str]) -> list[str]:
        compress = values.get("Mode", "compress") == "compress"
        if compress and values.get("Compression Format", USE_MIME_TYPE) == USE_MIME_TYPE:
            return ["to compress, Compression Format must name a format (not 'use mime.type attribute')"]
        return []

    def on_trigger(self, context: ProcessContext, session) -> None:
        compress = context.property("Mode").evaluate() == "compress"
        configured = context.property("Compression Format").evaluate()
        level = context.property("Compression Level").as_int()
        update_filename = context.property("Update Filename").as_bool()
        for flowfile in session.get_batch():
            name = configured
            if name == USE_MIME_TYPE:
                mime_type = flowfile.attributes.get("mime.type")
                if mime_type is None:
                    log.warning("%s: %s has no mime.type attribute; routing to failure", context.name, flowfile.uuid)
                    session.transfer(flowfile, FAILURE)
                    continue
                name = MIME_TYPES.get(mime_type.split(";")[0].strip().lower())
                if name is None:
                    session.transfer(flowfile, SUCCESS)  # not compressed data: nothing to do
                    continue
            fmt = FORMATS[name]
            try:
                if compress:
                    flowfile = session.rewrite(flowfile, lambda src, out: fmt.compress(src, out, level))
                else:
                    flowfile = session.rewrite(flowfile, fmt.decompress)
            except ContentRepositoryFullError:
                raise  # the whole trigger rolls back; nothing is wrong with the FlowFile
            except (_Corrupt, ContentRepositoryError, OSError) as err:
                log.warning("%s: cannot %s %s: %s", context.name, "compress" if compress else "decompress",
                            flowfile.uuid, err)
                session.transfer(flowfile, FAILURE)
                continue
            filename = flowfile.attributes.get("filename", "")
            if compress:
                changes = {"mime.type": fmt.mime_type}
                if update_filename:
                    changes["filename"] = filename + fmt.extension
                flowfile = session.put_all_attributes(flowfile, changes)
            else:
                if update_filename and filename.lower().endswith(fmt.extension) and len(filename) > len(fmt.extension):
                    flowfile = session.put_attribute(flowfile, "filename", filename[: -len(fmt.extension)])
                flowfile = session.remove_attribute(flowfile, "mime.type")
            session.transfer(flowfile, SUCCESS)
