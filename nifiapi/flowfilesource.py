"""Processors that make FlowFiles from nothing (no incoming connection)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from nifiapi.__jvm__ import ArrayList
from nifiapi.flowfiletransform import _bytes_of
from nifiapi.properties import ProcessContext


class FlowFileSource(ABC):
    """Base class of a source; implement ``create(context)``, which returns a
    ``FlowFileSourceResult``, or None when there is nothing to emit this time."""

    identifier = None
    logger = None

    def __init__(self):
        self.arrayList = ArrayList

    def setContext(self, context):
        self.process_context = ProcessContext(context)

    def createFlowFile(self):
        return self.create(self.process_context)

    @abstractmethod
    def create(self, context):
        """Return a ``FlowFileSourceResult``, or None."""


class FlowFileSourceResult:
    """A new FlowFile: the relationship it goes to, its attributes and contents (str is encoded
    as UTF-8; None leaves it empty)."""

    class Java:
        implements = ['org.apache.nifi.python.processor.FlowFileSourceResult']

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
