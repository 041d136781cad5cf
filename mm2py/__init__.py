"""mm2py: a MirrorMaker 2-compatible Kafka replication engine on Apache Spark."""

__version__ = "0.1.0"
