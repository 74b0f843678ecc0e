"""The repository services (``flowactors.engine.repository_services``) as Ray actors, one each.

Subclasses rather than bare ``ray.remote(...)`` wrappers so the dashboard's Actors tab names them
as what they are on Ray (``FlowFileRepositoryActor``, docs/cluster.md). Each restarts when its
process dies; the controller reopens it (``FlowController.repair``).
"""

import ray

from flowactors.engine.repository_services import (PROVENANCE_CONCURRENCY, ContentRepositoryService,
                                                   FlowFileRepositoryService, ProvenanceRepositoryService)


@ray.remote(num_cpus=0, max_restarts=-1)
class FlowFileRepositoryActor(FlowFileRepositoryService):
    """The write-ahead log's service in an actor of its own."""


@ray.remote(num_cpus=0, max_restarts=-1)
class ContentRepositoryActor(ContentRepositoryService):
    """The content repository's lifecycle service in an actor of its own."""


@ray.remote(num_cpus=0, max_concurrency=PROVENANCE_CONCURRENCY, max_restarts=-1)
class ProvenanceRepositoryActor(ProvenanceRepositoryService):
    """The provenance repository's service in an actor of its own (threaded: see the service)."""
