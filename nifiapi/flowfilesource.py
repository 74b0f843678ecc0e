"""Processors that make FlowFiles from nothing (no incoming connection)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from nifiapi._processor import FlowFileResult, ProcessorBase


class FlowFileSource(ProcessorBase, ABC):
    """Base class of a source; implement ``create(context)``, which returns a
    ``FlowFileSourceResult``, or None when there is nothing to emit this time."""

    def createFlowFile(self):
        return self.create(self.process_context)

    @abstractmethod
    def create(self, context):
        """Return a ``FlowFileSourceResult``, or None."""


class FlowFileSourceResult(FlowFileResult):
    """A new FlowFile: the relationship it goes to, its attributes and contents (str is encoded
    as UTF-8; None leaves it empty)."""

    class Java:
        implements = ['org.apache.nifi.python.processor.FlowFileSourceResult']
