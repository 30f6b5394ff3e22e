"""Spark Structured Streaming examples that use Spark's stock Kafka connector against Rockafka."""
