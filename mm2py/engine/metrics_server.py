"""The metrics endpoint of a running replicator: ``mm2py.metrics.Metrics`` served over HTTP, and the
threads that refresh what is read from the clusters (lag, checkpoint freshness, the audit).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from wsgiref.simple_server import WSGIServer

import structlog
from prometheus_client import start_http_server

from mm2py.audit.runner import Auditor
from mm2py.config.model import FlowConfig
from mm2py.freshness import checkpoint_freshness
from mm2py.metrics import Metrics
from mm2py.ops.status import status

log = structlog.get_logger(__name__)
REFRESH_SECONDS = 5.0
CHECKPOINT_REFRESH_SECONDS = 30.0


class MetricsServer:
    """The HTTP endpoint and the threads refreshing lag, checkpoint freshness and the audit."""

    def __init__(self, metrics: Metrics, port: int, flows: tuple[FlowConfig, ...], host: str = "0.0.0.0",
                 audit_interval_seconds: float = 0.0):
        self.metrics, self.port, self.flows, self.host = metrics, port, flows, host
        self.audit_interval_seconds = audit_interval_seconds
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._server: WSGIServer | None = None

    def start(self) -> MetricsServer:
        self._server, _ = start_http_server(self.port, addr=self.host, registry=self.metrics.registry)
        self._every("mm2py-metrics", REFRESH_SECONDS, self._refresh_status)
        checkpointing = [f for f in self.flows if f.checkpoints.emit_checkpoints_enabled]
        if checkpointing:
            interval = max(CHECKPOINT_REFRESH_SECONDS,
                           min(f.checkpoints.emit_checkpoints_interval_seconds for f in checkpointing))
            self._every("mm2py-checkpoints", interval, lambda: self._refresh_freshness(checkpointing))
        if self.audit_interval_seconds > 0:
            auditor = Auditor(self.flows)
            self._every("mm2py-audit", self.audit_interval_seconds,
                        lambda: auditor.round(self.metrics.observe_audit))
        log.info("metrics served", host=self.host, port=self.port, path="/metrics")
        return self

    def _every(self, name: str, seconds: float, work: Callable[[], None]) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                try:
                    work()
                except Exception as e:  # a metrics hiccup must never stop mirroring
                    log.warning("refreshing metrics failed", what=name, error=str(e))
                self._stop.wait(seconds)
        thread = threading.Thread(target=loop, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _refresh_status(self) -> None:
        self.metrics.observe_status(status(self.flows))

    def _refresh_freshness(self, flows: list[FlowConfig]) -> None:
        for flow in flows:
            self.metrics.observe_freshness(checkpoint_freshness(flow))

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
