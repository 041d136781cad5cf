"""Development tools: local Kafka clusters, a standalone Spark, the demo. Not used at run time."""
