"""Data source options are strings: frozen config objects travel pickled in them.

Kept apart from the connectors' readers so that a query's planner process (one per
streaming query) imports only what its reader needs: the heartbeat and checkpoint runners
never load the copy path and kafka-python.
"""

from __future__ import annotations

import base64
import pickle

from mm2py.flowspec import FlowSpec


def encode(value: object) -> str:
    """A picklable value (a FlowSpec, a CopySpec) as an option string."""
    return base64.b64encode(pickle.dumps(value)).decode("ascii")


def decode(text: str) -> object:
    return pickle.loads(base64.b64decode(text))


def decode_spec(text: str) -> FlowSpec:
    spec = decode(text)
    assert isinstance(spec, FlowSpec)
    return spec
