"""Core of the heartbeat connector: MM2 Heartbeat records."""
