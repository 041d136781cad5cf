"""The completeness audit: per topic, partition and minute, records on the source versus the target."""
