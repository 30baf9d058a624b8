"""The broker's requests to a name server, as the sandbox builds them (the product's own)."""

from namesrv_sandbox.broker_requests import register_request, topic_configs, unregister_request

__all__ = ["register_request", "topic_configs", "unregister_request"]
