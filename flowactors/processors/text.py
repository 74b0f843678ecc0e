"""Text processors: SplitText (by reference) and ReplaceText."""

from __future__ import annotations

import functools
import logging
import re
import shutil
import uuid as uuid_module
from typing import BinaryIO, Callable, NamedTuple

from flowactors.sdk import ContentRepositoryError, ContentRepositoryFullError, FlowFile
from flowactors.sdk.processor import ProcessContext, Processor, PropertyDescriptor, Relationship, validators
from flowactors.sdk.relationships import FAILURE, SUCCESS
from flowactors.processors._common import (
    CHUNK, boolean_property, charset_property, copy_bytes, iter_chunks, java_replacement, read_prefix,
)

log = logging.getLogger(__name__)

#: parents SplitText takes per trigger: each may fan out to very many children in one session
SPLIT_PARENTS_PER_TRIGGER = 100


class _Split(NamedTuple):
    offset: int
    length: int
    lines: int


class _NotEnoughLines(Exception):
    pass


def scan_splits(stream: BinaryIO, header_lines: int, lines_per_split: int, trim: bool,
                chunk_size: int = CHUNK) -> tuple[int, list[_Split]]:
    """Find the header's end and each split's byte range, reading the stream once, chunk by chunk.

    A line ends with ``\\n`` (a ``\\r`` before it belongs to the line ending); the last line may
    have no ending. With ``trim`` a split's range stops after its last byte that is neither ``\\r``
    nor ``\\n``, and a split made only of line endings is left out.
    """
    position = 0          # offset of the current chunk
    line_start = 0
    line_content_end = -1  # offset after the line's last byte that is not \r / \n (-1: none yet)
    lines_seen = 0
    header_end = 0
    splits: list[_Split] = []
    split_start = -1
    split_lines = 0
    split_content_end = -1

    def close_split(end: int) -> None:
        nonlocal split_start
        if trim:
            if split_content_end >= 0:
                splits.append(_Split(split_start, split_content_end - split_start, split_lines))
        else:
            splits.append(_Split(split_start, end - split_start, split_lines))
        split_start = -1

    def end_line(end: int) -> None:
        nonlocal lines_seen, header_end, split_start, split_lines, split_content_end, line_start, line_content_end
        lines_seen += 1
        if lines_seen <= header_lines:
            header_end = end
        else:
            if split_start < 0:
                split_start, split_lines, split_content_end = line_start, 0, -1
            split_lines += 1
            if line_content_end >= 0:
                split_content_end = line_content_end
            if split_lines == lines_per_split:
                close_split(end)
        line_start, line_content_end = end, -1

    for chunk in iter_chunks(stream, chunk_size):
        i = 0
        size = len(chunk)
        find = chunk.find
        while True:
            newline = find(b"\n", i)
            segment_end = newline if newline >= 0 else size
            if segment_end > i:
                if chunk[segment_end - 1] != 13:  # fast path: no \r before the newline
                    line_content_end = position + segment_end
                else:
                    stripped = len(chunk[i:segment_end].rstrip(b"\r"))
                    if stripped:
                        line_content_end = position + i + stripped
            if newline < 0:
                break
            end_line(position + newline + 1)
            i = newline + 1
        position += size
    if position > line_start:
        end_line(position)
    if split_start >= 0:
        close_split(position)
    if lines_seen < header_lines:
        raise _NotEnoughLines(f"the content has {lines_seen} line(s), fewer than the {header_lines} header lines")
    return header_end, splits


class SplitText(Processor):
    """Splits text into FlowFiles of Line Split Count lines each, **by reference**.

    Without header lines each split is a byte range of the original's content claim
    (``session.split``): no content byte is copied or written, whatever the size. With Header Line
    Count > 0 every split must start with the header, so its content is written: the header plus
    the split's bytes, streamed from one sequential read of the original. The content is scanned
    once, chunk by chunk (never loaded whole). A line ends with ``\\n`` or ``\\r\\n``. With Remove
    Trailing Newlines the line endings at the end of each split are left out of it, and a split of
    nothing but line endings is not emitted (so fragment.count counts the emitted splits). Splits
    get fragment.identifier, fragment.index (1-based, as NiFi's SplitText), fragment.count,
    fragment.size, segment.original.filename and text.line.count (lines in the split, header
    excluded); the original goes to original with fragment.identifier, fragment.count and
    segment.original.filename. Content with fewer lines than Header Line Count goes to failure.
    Provenance: a FORK event from the original to its splits.
    """

    description = "Splits text into FlowFiles of a number of lines (by reference when there is no header)"
    properties = (
        PropertyDescriptor("Line Split Count", "The number of lines in each split (header lines excluded)",
                           required=True, validator=validators.POSITIVE_INTEGER),
        PropertyDescriptor("Header Line Count", "The number of lines at the start that are a header, "
                           "copied to the start of every split", required=True, default="0",
                           validator=validators.NON_NEGATIVE_INTEGER),
        boolean_property("Remove Trailing Newlines", True, "Whether to leave the line endings at the end of "
                         "each split out of it (false if the splits are to be joined again)"),
    )
    SPLITS = Relationship("splits", "The split FlowFiles")
    ORIGINAL = Relationship("original", "The original FlowFile, once split")
    relationships = (SPLITS, ORIGINAL, FAILURE)

    def on_trigger(self, context: ProcessContext, session) -> None:
        per_split = context.property("Line Split Count").as_int()
        header_lines = context.property("Header Line Count").as_int()
        trim = context.property("Remove Trailing Newlines").as_bool()
        for flowfile in session.get_batch(min(context.batch_size, SPLIT_PARENTS_PER_TRIGGER)):
            try:
                with session.read(flowfile) as stream:
                    header_end, splits = scan_splits(stream, header_lines, per_split, trim)
                if not splits:
                    children = []  # nothing to fork (no FORK event without children)
                elif header_end:
                    children = self._with_header(session, flowfile, header_end, splits)
                else:
                    children = session.split(flowfile, [(s.offset, s.length) for s in splits])
            except ContentRepositoryFullError:
                raise  # the whole trigger rolls back; nothing is wrong with the FlowFile
            except (_NotEnoughLines, ContentRepositoryError, OSError) as err:
                log.warning("%s: cannot split %s: %s", context.name, flowfile.uuid, err)
                session.transfer(flowfile, FAILURE)
                continue
            identifier = str(uuid_module.uuid4())
            original_name = flowfile.attributes.get("filename", "")
            count = str(len(children))
            for index, (child, split) in enumerate(zip(children, splits), start=1):
                child = session.put_all_attributes(child, {
                    "fragment.identifier": identifier, "fragment.index": str(index), "fragment.count": count,
                    "fragment.size": str(child.size), "segment.original.filename": original_name,
                    "text.line.count": str(split.lines)})
                session.transfer(child, self.SPLITS)
            flowfile = session.put_all_attributes(flowfile, {
                "fragment.identifier": identifier, "fragment.count": count,
                "segment.original.filename": original_name})
            session.transfer(flowfile, self.ORIGINAL)

    @staticmethod
    def _with_header(session, flowfile: FlowFile, header_end: int, splits: list[_Split]) -> list[FlowFile]:
        """Children holding header + split bytes, copied in one sequential pass over the original."""
        children: list[FlowFile] = []
        try:
            with session.read(flowfile) as source:
                header = read_prefix(source, header_end)
                position = header_end
                for split in splits:
                    _skip(source, split.offset - position)  # line endings trimmed from the previous split

                    def write(out: BinaryIO, length: int = split.length) -> None:
                        out.write(header)
                        _copy(source, out, length)

                    children.append(session.create(parent=flowfile))
                    children[-1] = session.write(children[-1], write)
                    position = split.offset + split.length
        except BaseException:
            for child in children:  # leave nothing half-made in the session
                session.remove(child)
            raise
        session.provenance.fork(flowfile, children)
        return children


def _skip(source: BinaryIO, count: int) -> None:
    while count > 0:
        skipped = len(source.read(min(count, CHUNK)))
        if not skipped:
            raise ContentRepositoryError("the content ended early")
        count -= skipped


def _copy(source: BinaryIO, out: BinaryIO, count: int) -> None:
    if copy_bytes(source, out, count) < count:
        raise ContentRepositoryError("the content ended early")


# ---------------------------------------------------------------------------------- ReplaceText
class _TooLarge(Exception):
    pass


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern)


class ReplaceText(Processor):
    """Replaces text in the content: regular expression, literal, prepend, append or the whole of it.

    Replacement Strategy "Regex Replace" replaces every match of Search Value (a regular
    expression) with Replacement Value, in which ``$1``/``${name}`` are the groups of the match
    (``\\$`` a literal dollar); "Literal Replace" replaces every occurrence of Search Value taken
    literally; "Prepend"/"Append" add Replacement Value before/after; "Always Replace" replaces
    with Replacement Value outright. Both values may hold attribute expressions (evaluated per
    FlowFile first). Evaluation Mode "Entire text" works on the whole content, which must fit in
    Maximum Buffer Size (else failure) - except Prepend, Append and Always Replace, which stream
    and need no buffer; "Line-by-Line" streams the content and applies the strategy to each line
    without its line ending (kept as it was), each line having to fit in Maximum Buffer Size.
    Bytes that do not decode in Character Set are kept as they were. Provenance: CONTENT_MODIFIED
    (from the session).
    """

    description = "Replaces text in FlowFile content"
    REGEX, LITERAL, PREPEND, APPEND, ALWAYS = "Regex Replace", "Literal Replace", "Prepend", "Append", "Always Replace"
    ENTIRE, LINES = "Entire text", "Line-by-Line"
    properties = (
        PropertyDescriptor("Search Value", "The regular expression (or literal text) to search for",
                           required=True, default="(?s)(^.*$)", expression_language=True),
        PropertyDescriptor("Replacement Value", "The text to put in (with $1 for groups in Regex Replace)",
                           required=True, default="$1", expression_language=True),
        charset_property(),
        PropertyDescriptor("Maximum Buffer Size", "The most bytes held in memory: the whole content "
                           "(Entire text) or one line (Line-by-Line)", required=True, default="1 MB",
                           validator=validators.DATA_SIZE),
        PropertyDescriptor("Replacement Strategy", "How to replace", required=True, default=REGEX,
                           allowable_values=(PREPEND, APPEND, REGEX, LITERAL, ALWAYS)),
        PropertyDescriptor("Evaluation Mode", "Whether to work on the whole text or on each line", required=True,
                           default=LINES, allowable_values=(LINES, ENTIRE)),
    )
    relationships = (SUCCESS, FAILURE)

    def custom_validate(self, values) -> list[str]:
        search = values.get("Search Value", "(?s)(^.*$)")
        if values.get("Replacement Strategy", self.REGEX) == self.REGEX and "${" not in search:
            try:
                re.compile(search)
            except re.error as err:
                return [f"property 'Search Value': invalid regular expression {search!r}: {err}"]
        return []

    def on_trigger(self, context: ProcessContext, session) -> None:
        strategy = context.property("Replacement Strategy").evaluate()
        lines = context.property("Evaluation Mode").evaluate() == self.LINES
        charset = context.property("Character Set").evaluate()
        limit = context.property("Maximum Buffer Size").as_data_size()
        search_value = context.property("Search Value")
        replacement_value = context.property("Replacement Value")
        for flowfile in session.get_batch():
            try:
                replacement = replacement_value.evaluate(flowfile) or ""
                search = search_value.evaluate(flowfile) or ""
                transform = self._transform(strategy, search, replacement)
                flowfile = self._apply(session, flowfile, strategy, lines, transform, replacement, charset, limit)
            except ContentRepositoryFullError:
                raise  # the whole trigger rolls back; nothing is wrong with the FlowFile
            except (_TooLarge, re.error, ValueError, ContentRepositoryError, OSError) as err:
                log.warning("%s: cannot replace text in %s: %s", context.name, flowfile.uuid, err)
                session.transfer(flowfile, FAILURE)
                continue
            session.transfer(flowfile, SUCCESS)

    def _transform(self, strategy: str, search: str, replacement: str) -> Callable[[str], str]:
        if strategy == self.REGEX:
            pattern = _compiled(search)
            substitute = java_replacement(pattern, replacement)
            return lambda text: pattern.sub(substitute, text)
        if strategy == self.LITERAL:
            return (lambda text: text.replace(search, replacement)) if search else (lambda text: text)
        if strategy == self.PREPEND:
            return lambda text: replacement + text
        if strategy == self.APPEND:
            return lambda text: text + replacement
        return lambda text: replacement

    def _apply(self, session, flowfile: FlowFile, strategy: str, lines: bool, transform: Callable[[str], str],
               replacement: str, charset: str, limit: int) -> FlowFile:
        def encode(text: str) -> bytes:
            return text.encode(charset, errors="surrogateescape")

        if lines:
            return session.rewrite(flowfile, lambda source, out: _by_line(source, out, transform, charset, limit))
        if strategy == self.ALWAYS:
            return session.write_bytes(flowfile, encode(replacement))
        if strategy in (self.PREPEND, self.APPEND):
            def add(source: BinaryIO, out: BinaryIO) -> None:
                if strategy == self.PREPEND:
                    out.write(encode(replacement))
                shutil.copyfileobj(source, out, CHUNK)
                if strategy == self.APPEND:
                    out.write(encode(replacement))
            return session.rewrite(flowfile, add)
        if flowfile.size > limit:
            raise _TooLarge(f"the content ({flowfile.size} bytes) is larger than Maximum Buffer Size ({limit} bytes)")
        text = session.read_bytes(flowfile).decode(charset, errors="surrogateescape")
        return session.write_bytes(flowfile, encode(transform(text)))


def _by_line(source: BinaryIO, out: BinaryIO, transform: Callable[[str], str], charset: str, limit: int) -> None:
    """Stream ``source`` to ``out`` line by line, transforming each line without its ending."""
    carry = b""

    def emit(line: bytes) -> None:
        if line.endswith(b"\r\n"):
            body, ending = line[:-2], b"\r\n"
        elif line.endswith(b"\n"):
            body, ending = line[:-1], b"\n"
        else:
            body, ending = line, b""
        if len(body) > limit:
            raise _TooLarge(f"a line of {len(body)} bytes is larger than Maximum Buffer Size ({limit} bytes)")
        text = body.decode(charset, errors="surrogateescape")
        out.write(transform(text).encode(charset, errors="surrogateescape") + ending)

    for chunk in iter_chunks(source):
        data = carry + chunk if carry else chunk
        start = 0
        while (newline := data.find(b"\n", start)) >= 0:
            emit(data[start:newline + 1])
            start = newline + 1
        carry = data[start:]
        if len(carry) > limit + 1:
            raise _TooLarge(f"a line is larger than Maximum Buffer Size ({limit} bytes)")
    if carry:
        emit(carry)
