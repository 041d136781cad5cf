"""PySpark streaming connectors: thin adapters that hand off to mm2py's core."""
