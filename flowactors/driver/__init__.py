"""Loading a flow and running it: the layer above the engines and the components.

``loading`` reads a flow from where users keep it (a ``flow.py``, a flowactors JSON definition, a
NiFi export: ``nifi_export`` with ``nifi_standard_processors``) and names processor types;
``running`` starts a flow on an engine (and Ray, unless it is given one to join), watches it and
stops it; ``cluster_job`` is the same as a Ray job on a cluster (``flowactors submit``); both
watch the flow with ``watch``, until it is done, idle, stalled or timed out, or a stop was asked for.
"""
