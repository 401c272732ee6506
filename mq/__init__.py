"""mq: a RocketMQ-compatible message system (name server, broker, client, admin CLI, trace analytics)."""

__version__ = "0.1.0"
