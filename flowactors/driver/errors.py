"""The errors the driver raises before anything runs: a flow file that cannot be loaded, run
options that do not go together. Each message says what to do."""


class FlowLoadError(ValueError):
    """A flow file could not be loaded (missing, of another kind, defining no flow)."""


class RunOptionError(ValueError):
    """``run_flow``'s options do not go together (an engine that has no such option); the message
    names them."""
