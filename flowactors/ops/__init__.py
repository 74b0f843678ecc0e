"""Operations tools: provenance search and lineage (text and pictures), replay, queue listing and
emptying, the status table, and the client for flows submitted to a Ray cluster."""
