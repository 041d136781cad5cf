"""Metadata that follows the data: topic configs and topic ACLs of mirrored topics."""
