"""The Ray engine: executor actors that host processor tasks and queues, the repository actors,
the flow controller, and how a flow is started on them (locally: ``runner``; as a Ray job: ``job``)."""
