"""Core of the checkpoint connector: exact offset translation and MM2 Checkpoint records."""
