"""The SDK a flow author and a component author use: the flow (``flow``), the processor API
(``processor``), the session (``session``), ports and funnels (``ports``), the expression language,
parameters, settings; ``flowactors.testing`` runs a processor in a test.

Components import the SDK only (docs/architecture.md, "The layers"): the value types a processor
handles and the errors its content reads and writes raise are here, though the repositories
define them.
"""

from repositories.content.errors import ContentRepositoryError, ContentRepositoryFullError
from repositories.model import FlowFile, now_millis

__all__ = ["ContentRepositoryError", "ContentRepositoryFullError", "FlowFile", "now_millis"]
