"""The engines behind one seam. The core every engine shares: the session backend and its commit
order (``backend``), the trigger loop (``task``), transports (``transport``), placement
(``placement``) and group commit (``group_commit``). The Ray engine is ``actors``; queues are
``queues``; the in-process engine for tests is ``flowactors.sdk.testing``."""
