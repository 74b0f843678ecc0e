"""Connection queues: the queue's logic (``connection``), one node's share of it with its order and
swap runs (``partition``), and the I/O of swapping (``swapping``)."""
