"""The engines: one core (backend, trigger loop, placement) and the transports that differ."""
