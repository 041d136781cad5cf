"""Data source options are strings: a frozen flow travels pickled in one.

Kept apart from the connectors' readers so that a query's planner process (one per
streaming query) imports only what its reader needs: the heartbeat and checkpoint runners
never load the copy path and kafka-python.
"""

from __future__ import annotations

import base64
import pickle

from mm2py.config.model import FlowConfig


def encode_flow(flow: FlowConfig) -> str:
    return base64.b64encode(pickle.dumps(flow)).decode("ascii")


def decode_flow(text: str) -> FlowConfig:
    return pickle.loads(base64.b64decode(text))
