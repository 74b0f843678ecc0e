"""Processors that turn one FlowFile into a result: new content and attributes, and where it goes."""

from __future__ import annotations

from abc import ABC, abstractmethod

from nifiapi._processor import FlowFileResult, ProcessorBase


class FlowFileTransform(ProcessorBase, ABC):
    """Base class of a transform; implement ``transform(context, flowFile)``."""

    def transformFlowFile(self, flowfile):
        return self.transform(self.process_context, flowfile)

    @abstractmethod
    def transform(self, context, flowFile):
        """Return a ``FlowFileTransformResult`` for ``flowFile``."""


class FlowFileTransformResult(FlowFileResult):
    """What ``transform`` returns: a relationship name, attributes to add, and new contents
    (str is encoded as UTF-8; None keeps the FlowFile's contents)."""

    class Java:
        implements = ['org.apache.nifi.python.processor.FlowFileTransformResult']
