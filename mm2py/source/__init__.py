"""The source-data connector's core: planning ranges on the driver, copying them in tasks."""
