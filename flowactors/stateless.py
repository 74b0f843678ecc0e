"""The stateless engine's public names: ``from flowactors.stateless import StatelessFlow``.

A flow run as one transaction per trigger, in memory (``flowactors.engine.stateless_engine`` has the
engine and its guarantees; docs/stateless.md the guide).
"""

from flowactors.engine.errors import TriggerFailed
from flowactors.engine.stateless_engine import (InMemoryStateStore, StatelessBatches, StatelessFlow, StatelessOutput,
                                                TriggerResult)

__all__ = ["InMemoryStateStore", "StatelessBatches", "StatelessFlow", "StatelessOutput", "TriggerFailed",
           "TriggerResult"]
