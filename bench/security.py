"""How the bench's measured clients reach its two clusters: plaintext, or TLS on both.

``--security plaintext,tls`` (bench.run) runs every tool on both. With ``tls`` among the modes
each bench broker gets a second client listener, SSL on its port + ``TLS_PORT_SHIFT``, beside
its PLAINTEXT one: server-authenticated TLS, no client certificate; the controller and
inter-broker listeners stay plaintext. Both modes then run on the same brokers and the same
loaded data, so the only thing that differs between a plaintext and a TLS run of a tool is the
TLS on its own connections.

The replicators and the floor get what an MM2 operator writes for a TLS cluster: per cluster
alias ``security.protocol = SSL`` and a JKS truststore (Java's default store type) with its
password, holding the certificate the brokers present. mm2py runs the same file keys as MM2.
The bench's own observers (loading the source, counting the target, verifying what landed)
use the plaintext listener in both modes, so their load on the brokers does not change with
the mode.

Invariant: a ``Network`` names the ports and client settings of one mode for both clusters;
the plaintext ``Network`` carries no client settings at all, so plaintext runs write the
files they wrote before TLS existed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.variants import parse_choices
from mm2py.config.model import ClusterConfig, frozen_map
from mm2py.dev import cluster as devcluster
from mm2py.kafka.clientconf import rdkafka_config

MODES = ("plaintext", "tls")
# the SSL listener's port over the broker's PLAINTEXT port (+1 is its controller)
TLS_PORT_SHIFT = 2
TRUSTSTORE, TRUSTSTORE_PASSWORD = "truststore.jks", "mm2py-bench"
# results.md's and the published table's words for what the TLS runs ran on
TLS_SETTING = ("Clients reach both clusters over TLS: an SSL listener beside each broker's PLAINTEXT one "
               "(server-authenticated, no client certificate; controller and inter-broker listeners plaintext), "
               "and every tool's clients, the floor's included, name a JKS truststore (security.protocol = SSL, "
               "ssl.truststore.location/password/type) as an MM2 operator's file does: one file for MM2 and mm2py")


def parse_modes(text: str) -> tuple[str, ...]:
    """``--security``'s value: a comma-separated list of ``MODES``, each once, in the order given."""
    return parse_choices("--security", "mode", text, MODES)


def modes_of(workload: str, modes: tuple[str, ...], tls_workloads: tuple[str, ...] | None) -> tuple[str, ...]:
    """The modes workload ``workload`` (its key, a-f) runs in: TLS only where ``tls_workloads``
    (None: every workload) names it; a workload left with no mode is an error naming it."""
    chosen = tuple(m for m in modes if m != "tls" or tls_workloads is None or workload in tls_workloads)
    if not chosen:
        raise ValueError(f"workload {workload}: --security {','.join(modes)} runs TLS only, and --tls-workloads "
                         f"{','.join(tls_workloads or ())} leaves it out, so it would run in no mode")
    return chosen


def security_plan(keys: list[str], security: str, tls_workloads: str | None,
                  shape_too: bool = False) -> dict[str, tuple[str, ...]]:
    """Each workload's security modes from ``--security`` and ``--tls-workloads``; a ValueError names
    the option and workload that make no sense (workload e, bench.shape, runs plaintext only)."""
    modes = parse_modes(security)
    if shape_too and "plaintext" not in modes:
        raise ValueError(f"--security {security}: workload e (bench.shape) runs on plaintext clusters of its own")
    tls_keys = None
    if tls_workloads is not None:
        if "tls" not in modes:
            raise ValueError(f"--tls-workloads {tls_workloads} needs tls in --security (given: {security})")
        tls_keys = tuple(k.strip() for k in tls_workloads.split(",") if k.strip())
        for k in tls_keys:
            if k == "e":
                raise ValueError("--tls-workloads: workload e (bench.shape) runs on plaintext clusters of its own")
            if k not in keys:
                raise ValueError(f"--tls-workloads: workload {k!r} is not among --workloads {','.join(keys)}")
    return {key: modes_of(key, modes, tls_keys) for key in keys}


@dataclass(frozen=True)
class Endpoint:
    """One cluster as a measured client reaches it: its port and the Java client settings (MM2 file keys)."""

    port: int
    client: Mapping[str, str] = field(default_factory=frozen_map)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def lines(self, alias: str) -> list[str]:
        """The settings as lines of an MM2 file for cluster ``alias``."""
        return [f"{alias}.{key} = {value}" for key, value in self.client.items()]

    def rdkafka(self, alias: str, **settings: object) -> dict[str, object]:
        """A confluent-kafka client's settings for this endpoint (mm2py's own translation), plus ``settings``."""
        conf = rdkafka_config(self.bootstrap, self.client, alias) if self.client else {"bootstrap.servers":
                                                                                          self.bootstrap}
        return {**conf, **settings}

    def cluster(self, alias: str) -> ClusterConfig:
        """The endpoint as mm2py's tools take a cluster: the settings for every kind of client."""
        client = frozen_map(self.client)
        return ClusterConfig(alias, self.bootstrap, client=client, consumer=client, producer=client, admin=client)


@dataclass(frozen=True)
class Network:
    """One mode's endpoints: the source (A) and the target (B) cluster."""

    mode: str
    source: Endpoint
    target: Endpoint

    @property
    def tls(self) -> bool:
        return self.mode == "tls"


@dataclass(frozen=True)
class TlsStores:
    """The brokers' key material and the clients' JKS truststore, in one folder."""

    folder: Path
    broker: Mapping[str, str]  # the SSL listener's ssl.* broker settings (mm2py.dev.cluster's PKCS12 store)
    pem: str  # the brokers' certificate, PEM: what the JKS truststore holds

    @property
    def truststore(self) -> Path:
        return self.folder / TRUSTSTORE

    def client(self) -> dict[str, str]:
        """What an MM2 operator writes for a cluster behind a TLS listener with a JKS truststore."""
        return {"security.protocol": "SSL", "ssl.truststore.location": str(self.truststore),
                "ssl.truststore.password": TRUSTSTORE_PASSWORD, "ssl.truststore.type": "JKS"}


def make_stores(folder: Path) -> TlsStores:
    """The brokers' certificate (made by mm2py.dev.cluster, once per folder) and a JKS truststore
    of it made with keytool, as an operator imports a cluster's CA. Both brokers share them."""
    folder.mkdir(parents=True, exist_ok=True)
    server, client = devcluster.listener_properties("SSL", 0, 0, folder)
    broker = {key: value for key, value in server.items() if key.startswith("ssl.")}
    pem = client["ssl.truststore.location"]
    store = folder / TRUSTSTORE
    store.unlink(missing_ok=True)
    done = subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "bench-broker", "-file", pem,
                           "-keystore", str(store), "-storetype", "JKS", "-storepass", TRUSTSTORE_PASSWORD],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"making the bench's JKS truststore {store} with keytool failed: "
                           f"{(done.stderr or done.stdout).strip()[-500:]}")
    return TlsStores(folder, broker, pem)


def broker_listeners(port: int, stores: TlsStores) -> dict[str, str]:
    """Broker settings (over mm2py.dev.cluster's PLAINTEXT ones) adding the SSL client listener on
    ``port + TLS_PORT_SHIFT``; the PLAINTEXT listener stays the inter-broker one."""
    tls_port, controller = port + TLS_PORT_SHIFT, port + 1
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{tls_port},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{tls_port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        **stores.broker,
    }


def network(mode: str, source_port: int, target_port: int, stores: TlsStores | None) -> Network:
    """Mode ``mode``'s endpoints of the clusters whose PLAINTEXT listeners are on the two ports."""
    if mode == "plaintext":
        return Network(mode, Endpoint(source_port), Endpoint(target_port))
    if mode != "tls" or stores is None:
        raise ValueError(f"no endpoints for security mode {mode!r}" + (" without TLS stores" if mode == "tls" else ""))
    client = frozen_map(stores.client())
    return Network(mode, Endpoint(source_port + TLS_PORT_SHIFT, client), Endpoint(target_port + TLS_PORT_SHIFT, client))


def java_properties(client: Mapping[str, str]) -> str:
    """A Java client's properties file of ``client`` (bench.floor's ``--command-config``)."""
    return "".join(f"{key}={value}\n" for key, value in client.items())
