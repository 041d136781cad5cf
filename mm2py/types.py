"""Small value types shared by every layer."""

from __future__ import annotations

TP = tuple[str, int]
"""A topic-partition: (topic name, partition number)."""
