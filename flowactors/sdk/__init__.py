"""The SDK a flow author uses: the flow, the processor API, the session, the expression language,
settings, and a runner for testing processors without Ray (``flowactors.sdk.testing``)."""
