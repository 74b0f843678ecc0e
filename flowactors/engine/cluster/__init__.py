"""One flow across a Ray cluster (seed 002): every node runs the whole flow over its own
repositories, and a load-balanced connection spreads its FlowFiles over the nodes.

* ``topology``: the cluster's nodes as the flow knows them (persisted with the flow), how a node is
  found on Ray, and the live view (connected nodes, the primary) every node's executors share.
* ``hash_ring``: consistent hashing for ``partition-by-attribute``.
* ``partitioning``: which node each FlowFile offered to a load-balanced connection goes to, decided
  before the commit's write-ahead-log transaction, so the log records the partition.
* ``transfer``: moving a partition's FlowFiles to their node (``LoadBalanceSender``, a task beside
  the partition) and taking them in there (``TransferReceiver``, in the executor that hosts the
  connection's queue on the receiving node).
* ``coordinator``: the cluster's controller: one ``FlowController`` a node, primary election, node
  loss and return, one status across the nodes.
"""
