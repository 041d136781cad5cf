"""A local Prometheus and promtool for checking mm2py's metrics, dashboard and alert rules (tests).

Prometheus and promtool are Debian's ``prometheus`` package (``make prometheus`` installs it).
``LocalPrometheus`` runs one on 127.0.0.1 only, scraping given loopback targets every second
and evaluating the shipped rules every second. ``promtool_series`` turns a scrape of
``/metrics`` into the ``input_series`` of a ``promtool test rules`` file, so the alert rules are
unit-tested on what a replicator really serves.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "mm2py-rules.yaml"
DASHBOARD = REPO / "deploy" / "grafana" / "mm2py.json"
JOB = "mm2py"


def binaries() -> tuple[str, str] | None:
    """Paths of prometheus and promtool, or None when either is missing."""
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    return (prometheus, promtool) if prometheus and promtool else None


class LocalPrometheus:
    """A Prometheus server on 127.0.0.1:``port`` scraping ``targets`` (host:port) as job ``mm2py``."""

    def __init__(self, workdir: Path, port: int, targets: Iterable[str], rules: Path = RULES,
                 interval: str = "1s"):
        self.workdir, self.port, self.targets, self.rules, self.interval = workdir, port, list(targets), rules, interval
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{port}"

    def start(self, timeout: float = 60) -> LocalPrometheus:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = {
            "global": {"scrape_interval": self.interval, "evaluation_interval": self.interval,
                       "scrape_timeout": self.interval},
            "rule_files": [str(self.rules)],
            "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": self.targets}]}],
        }
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        found = binaries()
        if found is None:
            raise RuntimeError("prometheus is not installed: run `make prometheus`")
        log = open(self.workdir / "prometheus.log", "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(
            [found[0], f"--config.file={self.workdir / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.workdir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--storage.tsdb.retention.time=1d"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"prometheus not ready in {timeout} s: {self.log_tail()}")

    def log_tail(self, n: int = 20) -> str:
        path = self.workdir / "prometheus.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""

    def _get(self, path: str, **params: str) -> object:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        if body.get("status") != "success":
            raise RuntimeError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        """An instant query's result vector: ``[{"metric": {...}, "value": [t, "v"]}, ...]``."""
        data = self._get("/api/v1/query", query=expr)
        result = data["result"]  # type: ignore[index]
        return result if isinstance(result, list) else [result]

    def alerts(self) -> list[dict]:
        """Active alerts (pending or firing): ``[{"labels": {...}, "state": ..., ...}]``."""
        return self._get("/api/v1/alerts")["alerts"]  # type: ignore[index]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def scrape(url: str, timeout: float = 5) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def _selector(name: str, labels: Mapping[str, str]) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def promtool_series(text: str, *, steps: int, step_s: int = 60, frozen: bool = False, at: float | None = None,
                    instance: str = "127.0.0.1:9404") -> list[dict]:
    """``input_series`` for promtool from one scrape, held for ``steps`` steps of ``step_s`` seconds.

    Timestamps (``*_timestamp_seconds``, ``*_since_seconds``) are made relative to the scrape
    time ``at`` (promtool's clock starts at 0). A live process (``frozen=False``) keeps its
    timestamps moving with the clock and its ages constant; a stuck one (``frozen=True``) keeps
    its timestamps and lets its ages (``*_age_seconds``) grow.
    """
    at = time.time() if at is None else at
    out = [{"series": _selector("up", {"job": JOB, "instance": instance}), "values": f"1x{steps}"}]
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith(("_created",)) or s.value != s.value:  # NaN: nothing to hold
                continue
            labels = {**s.labels, "job": JOB, "instance": instance}
            value = s.value
            if s.name.endswith(("_timestamp_seconds", "_since_seconds")):
                value, growth = value - at, (0 if frozen else step_s)
            elif s.name.endswith("_age_seconds"):
                growth = step_s if frozen else 0
            else:
                growth = 0
            out.append({"series": _selector(s.name, labels), "values": f"{_num(value)}+{growth}x{steps}"})
    return out


def _num(v: float) -> str:
    return repr(int(v)) if float(v).is_integer() else repr(float(v))


_LABEL_REF = re.compile(r"\{\{\s*\$labels\.(\w+)\s*\}\}")


def rules_by_alert(rules: Path = RULES) -> dict[str, dict]:
    doc = yaml.safe_load(rules.read_text())
    return {r["alert"]: r for g in doc["groups"] for r in g["rules"] if "alert" in r}


def expected_alert(alert: str, labels: Mapping[str, str], rules: Path = RULES) -> dict:
    """An ``exp_alerts`` entry: the alert's labels plus ``labels``, its annotations rendered."""
    rule = rules_by_alert(rules)[alert]
    all_labels = {**rule.get("labels", {}), **labels}
    annotations = {k: _LABEL_REF.sub(lambda m: all_labels.get(m.group(1), ""), v)
                   for k, v in rule.get("annotations", {}).items()}
    return {"exp_labels": all_labels, "exp_annotations": annotations}


def run_promtool_tests(tests: list[dict], workdir: Path, rules: Path = RULES,
                       interval: str = "1m") -> subprocess.CompletedProcess:
    """``promtool test rules`` over ``tests`` (each: input_series, alert_rule_test)."""
    found = binaries()
    if found is None:
        raise RuntimeError("promtool is not installed: run `make prometheus`")
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "mm2py-rules.test.yaml"
    path.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": interval, "tests": tests},
                                   sort_keys=False))
    return subprocess.run([found[1], "test", "rules", str(path)], capture_output=True, text=True, timeout=120)


def dashboard_queries(dashboard: Path = DASHBOARD, variables: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(panel title, PromQL with the dashboard's variables filled in) of every panel target."""
    doc = json.loads(dashboard.read_text())
    values = {"__rate_interval": "1m", "__interval": "15s", **(variables or {})}
    out = []

    def fill(expr: str) -> str:
        for name in sorted(values, key=len, reverse=True):
            expr = expr.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
        return expr

    def walk(panels: list[dict]) -> None:
        for panel in panels:
            walk(panel.get("panels", []))
            for target in panel.get("targets", []):
                if target.get("expr"):
                    out.append((panel.get("title", ""), fill(target["expr"])))
    walk(doc.get("panels", []))
    return out
