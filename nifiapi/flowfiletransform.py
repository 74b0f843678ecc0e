"""Processors that turn one FlowFile into a result: new content and attributes, and where it goes."""

from __future__ import annotations

from abc import ABC, abstractmethod

from nifiapi.__jvm__ import ArrayList
from nifiapi.properties import ProcessContext


class FlowFileTransform(ABC):
    """Base class of a transform; implement ``transform(context, flowFile)``.

    ``logger`` and ``identifier`` are set by the runtime after the processor is constructed.
    """

    identifier = None
    logger = None

    def __init__(self):
        self.arrayList = ArrayList

    def setContext(self, context):
        self.process_context = ProcessContext(context)

    def transformFlowFile(self, flowfile):
        return self.transform(self.process_context, flowfile)

    @abstractmethod
    def transform(self, context, flowFile):
        """Return a ``FlowFileTransformResult`` for ``flowFile``."""


def _bytes_of(contents):
    return str.encode(contents) if isinstance(contents, str) else contents


class FlowFileTransformResult:
    """What ``transform`` returns: a relationship name, attributes to add, and new contents
    (str is encoded as UTF-8; None keeps the FlowFile's contents)."""

    class Java:
        implements = ['org.apache.nifi.python.processor.FlowFileTransformResult']

    def __init__(self, relationship, attributes=None, contents=None):
        self.relationship = relationship
        self.attributes = attributes
        self.contents = _bytes_of(contents)

    def getRelationship(self):
        return self.relationship

    def getContents(self):
        return self.contents

    def getAttributes(self):
        return None if self.attributes is None else dict(self.attributes)
