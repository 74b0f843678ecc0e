"""FlowFile Stream v3 records assembled by hand from the documented layout
(docs/formats/flowfile-stream-v3.md), never with flowactors' own writer: what NiFi would send."""

from __future__ import annotations

import struct


def v3_record(attributes: dict[str, str], content: bytes) -> bytes:
    """One FlowFile as NiFi's v3 packager writes it (short fields only)."""
    out = b"NiFiFF3" + struct.pack(">H", len(attributes))
    for key, value in attributes.items():
        for text in (key.encode(), value.encode()):
            out += struct.pack(">H", len(text)) + text
    return out + struct.pack(">q", len(content)) + content
