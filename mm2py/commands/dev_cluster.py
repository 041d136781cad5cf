"""``mm2py dev-cluster up|down|list|stop|kill|start|pause|resume``: local Kafka clusters for trying mm2py out."""

from __future__ import annotations

import argparse
import sys

from mm2py.dev import cluster as devcluster
from mm2py.dev.oidc_process import CLIENT_ID, start_oidc, stop_oidc
from mm2py.errors import DevClusterError


def _oauth(args: argparse.Namespace) -> devcluster.OAuthLogin | None:
    """With --sasl-mechanism OAUTHBEARER: the cluster's own OIDC provider, started (mm2py.dev.oidc_process)."""
    if args.sasl_mechanism.upper() != "OAUTHBEARER":
        return None
    if not args.security.startswith("SASL_"):
        raise DevClusterError("--sasl-mechanism OAUTHBEARER needs --security SASL_PLAINTEXT or SASL_SSL")
    running = devcluster.cluster_status(args.name)
    if running is not None and running.running:
        return None  # up again: the running cluster and its provider are returned as they are
    directory = devcluster.default_workdir() / args.name
    token_url, jwks_url, secret = start_oidc(directory, args.oidc_port or args.port + 2, args.token_lifetime)
    return devcluster.OAuthLogin(token_url, jwks_url, CLIENT_ID, secret)


def _up(args: argparse.Namespace) -> int:
    oauth = _oauth(args)
    try:
        cluster = devcluster.start_cluster(args.name, args.port, listeners_security=args.security,
                                           controller_port=args.controller_port, wait_timeout=args.timeout,
                                           brokers=args.brokers, oauth=oauth,
                                           sasl_mechanism=args.sasl_mechanism, client_auth=args.client_auth)
    except BaseException:
        if oauth is not None:
            stop_oidc(devcluster.default_workdir() / args.name)
        raise
    if cluster.protocol != "PLAINTEXT":
        # stdout carries only the address, so scripts can use $(mm2py dev-cluster up ...)
        print(f"client settings: {cluster.directory / 'client.properties'}", file=sys.stderr)
    if args.sasl_mechanism == "GSSAPI":
        print(f"Kerberos realm: export KRB5_CONFIG={cluster.directory / 'kdc' / 'krb5.conf'}", file=sys.stderr)
    print(cluster.bootstrap, flush=True)
    return 0


def _down(args: argparse.Namespace) -> int:
    if args.all:
        names = [c.name for c in devcluster.list_clusters()]
    elif args.name:
        names = [args.name]
    else:
        raise DevClusterError("name a cluster to stop, or pass --all")
    for name in names:
        stopped = devcluster.stop_cluster(name, keep_data=args.keep_data)
        print(f"{name}: {'stopped' if stopped else 'was not running'}")
    return 0


def _list(_args: argparse.Namespace) -> int:
    clusters = devcluster.list_clusters()
    if not clusters:
        print("no dev clusters")
        return 0
    print(f"{'NAME':<16} {'BOOTSTRAP':<22} {'PID':>8}  STATE")
    for c in clusters:
        # one pid per broker, "-" for those not running
        pid = ",".join(str(node.pid) if node.running else "-" for node in c.nodes)
        print(f"{c.name:<16} {c.bootstrap:<22} {pid:>8}  {c.state}")
    return 0


def _broker_action(args: argparse.Namespace) -> int:
    name, index = args.name, args.broker
    if args.action == "start":
        node = devcluster.start_broker(name, index, wait_timeout=args.timeout).node(index)
        print(f"{name} broker {index}: running at {node.bootstrap}")
    elif args.action in ("stop", "kill"):
        act, past = (devcluster.stop_broker, "stopped") if args.action == "stop" else (devcluster.kill_broker, "killed")
        print(f"{name} broker {index}: {past if act(name, index) else 'was not running'}")
    elif args.action == "pause":
        devcluster.pause_broker(name, index)
        print(f"{name} broker {index}: paused (SIGSTOP); `mm2py dev-cluster resume {name} --broker {index}`")
    else:
        devcluster.resume_broker(name, index)
        print(f"{name} broker {index}: resumed")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dev-cluster", help="local Kafka clusters (KRaft) on 127.0.0.1",
        description="Local Kafka clusters (KRaft, one or more combined broker+controller nodes) on 127.0.0.1, "
                    "kept under var/dev-clusters/NAME (MM2PY_VAR_DIR moves var/).")
    sub = parser.add_subparsers(dest="action", required=True)

    up = sub.add_parser("up", help="start a cluster; prints its bootstrap address once it accepts requests")
    up.add_argument("name")
    up.add_argument("--port", type=int, required=True,
                    help="client port; with --brokers N, broker i listens on port+2*i and its controller on port+2*i+1")
    up.add_argument("--brokers", type=int, default=1,
                    help="brokers in one KRaft quorum (default 1); several speak PLAINTEXT only")
    up.add_argument("--controller-port", type=int, help="KRaft controller port (default: port+1; one broker only)")
    up.add_argument("--security", default="PLAINTEXT", choices=devcluster.SECURITY_PROTOCOLS,
                    help="client listener protocol; SASL user admin/admin-secret, a self-signed TLS certificate")
    up.add_argument("--sasl-mechanism", default="PLAIN", choices=("PLAIN", "OAUTHBEARER", "GSSAPI"),
                    help="how clients sign in on a SASL listener: PLAIN (admin/admin-secret); OAUTHBEARER: "
                         "RS256 tokens of an OIDC provider started beside the brokers (client credentials in "
                         "client.properties); GSSAPI: Kerberos, from a KDC of its own on port+3")
    up.add_argument("--client-auth", action="store_true",
                    help="with --security SSL or SASL_SSL: the broker requires a client certificate "
                         "(ssl.client.auth=required); client.properties names a PKCS12 key store")
    up.add_argument("--oidc-port", type=int, help="the OIDC provider's port (default: port+2)")
    up.add_argument("--token-lifetime", type=float, default=3600, help="OAUTHBEARER token lifetime in seconds")
    up.add_argument("--timeout", type=float, default=90, help="seconds to wait for the brokers (default 90)")
    up.set_defaults(func=_up)

    down = sub.add_parser("down", help="stop a cluster (all its brokers) and delete its data")
    down.add_argument("name", nargs="?")
    down.add_argument("--all", action="store_true", help="stop every dev cluster")
    down.add_argument("--keep-data", action="store_true", help="keep the logs for the next `up`")
    down.set_defaults(func=_down)

    sub.add_parser("list", help="show dev clusters: name, bootstrap, pids, running/degraded/stopped"
                   ).set_defaults(func=_list)

    for action, what in (
        ("stop", "stop one broker (SIGTERM: a controlled shutdown) and wait until it has exited; its data stays"),
        ("kill", "kill one broker (SIGKILL, as a crash would); its data stays"),
        ("start", "start a stopped or killed broker again on its data; returns once it is a live broker"),
        ("pause", "freeze one broker (SIGSTOP), as a long GC pause would"),
        ("resume", "unfreeze a paused broker (SIGCONT)"),
    ):
        one = sub.add_parser(action, help=what)
        one.add_argument("name")
        one.add_argument("--broker", type=int, required=True, metavar="I", help="the broker's index, 0-based")
        if action == "start":
            one.add_argument("--timeout", type=float, default=90, help="seconds to wait for it (default 90)")
        one.set_defaults(func=_broker_action)
