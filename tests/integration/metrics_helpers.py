"""A running replicator's metrics endpoint, read as a scraper does: a free port for it, its samples."""

from __future__ import annotations

import socket
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return {}
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def total(metrics: dict, name: str, topic: str, **labels: str) -> float:
    return sum(v for (n, ls), v in metrics.items()
               if n == name and ("topic", topic) in ls and all((k, v2) in ls for k, v2 in labels.items()))
