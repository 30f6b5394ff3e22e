"""RocketMQ remoting-protocol gateway: NameServer, broker processors and the Python SDK."""
