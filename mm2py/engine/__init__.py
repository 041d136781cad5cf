"""Running flows on Spark: the session, one streaming query per connector, shutdown."""
