"""The repository services (``flowactors.engine.repository_services``) as Ray actors, one each.

Subclasses rather than bare ``ray.remote(...)`` wrappers so the dashboard's Actors tab names them
as what they are on Ray (``FlowFileRepositoryActor``, docs/cluster.md). Each restarts when its
process dies; the controller opens it again (``FlowController.repair``).
"""

import ray

from flowactors.engine import ACTOR_RESTARTS
from flowactors.engine.repository_services import (PROVENANCE_CONCURRENCY, ContentRepositoryService,
                                                   FlowFileRepositoryService, ProvenanceRepositoryService)


@ray.remote(num_cpus=0, max_restarts=ACTOR_RESTARTS)
class FlowFileRepositoryActor(FlowFileRepositoryService):
    """The write-ahead log's service in an actor of its own."""


@ray.remote(num_cpus=0, max_restarts=ACTOR_RESTARTS)
class ContentRepositoryActor(ContentRepositoryService):
    """The content repository's lifecycle service in an actor of its own."""


# Ray's stubs give ray.remote a task's options only: max_concurrency, an actor's, is not among them
@ray.remote(num_cpus=0, max_concurrency=PROVENANCE_CONCURRENCY,  # type: ignore[call-overload]
            max_restarts=ACTOR_RESTARTS)
class ProvenanceRepositoryActor(ProvenanceRepositoryService):
    """The provenance repository's service in an actor of its own (threaded: see the service)."""
