"""The runtime on Ray: queue, processor, repository and controller actors (one module each)."""
