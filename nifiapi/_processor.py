"""What the three processor base classes and their two FlowFile results share (not part of NiFi's API)."""

from __future__ import annotations

from nifiapi.__jvm__ import ArrayList
from nifiapi.properties import ProcessContext


class ProcessorBase:
    """``logger`` and ``identifier`` are set by the runtime after the processor is constructed;
    ``setContext`` gives ``process_context``, the context the processor's calls receive."""

    identifier = None
    logger = None

    def __init__(self):
        self.arrayList = ArrayList

    def setContext(self, context):
        self.process_context = ProcessContext(context)


class FlowFileResult:
    """A relationship name, attributes to set, and contents (str is encoded as UTF-8; None
    leaves them as they are)."""

    def __init__(self, relationship, attributes=None, contents=None):
        self.relationship = relationship
        self.attributes = attributes
        self.contents = str.encode(contents) if isinstance(contents, str) else contents

    def getRelationship(self):
        return self.relationship

    def getContents(self):
        return self.contents

    def getAttributes(self):
        return None if self.attributes is None else dict(self.attributes)
