"""RocketMQ 5 gRPC front (MessagingService v2): see docs/design/grpc-proxy.md."""
