"""What ``kbroker serve`` adds for dev and CI: the dev profile, the ready file, JSON logs, the banner.

``--ready-file FILE`` is written (atomically: a temp file renamed into place) once every listener
is bound, so a script or another language's test suite can wait for the file instead of parsing
logs::

    {"bootstrap_servers": "127.0.0.1:40123", "listeners": {"PLAINTEXT": {"host": "127.0.0.1",
     "port": 40123}}, "pid": 4242, "data_dirs": ["/tmp/x"], "cluster_id": "...", "node_id": 1}

With ``--log-format json`` every log line on stderr is a JSON object and the same ready object
(with ``"event": "ready"``) is printed as one line on stdout; otherwise a banner is printed there.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

from kbroker.cli.version import VERSION


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dev", action="store_true",
                        help="dev profile: no initial rebalance delay, 1-partition internal topics, "
                             "auto-create on, small segments, retention checked every second")
    parser.add_argument("--ready-file", metavar="FILE",
                        help="write a JSON object (bootstrap servers, bound ports, PID) once serving")
    parser.add_argument("--log-format", choices=["text", "json"], default="text",
                        help="text (default) or one JSON object per line")


def overrides(args: argparse.Namespace) -> list[str]:
    """``key=value`` overrides for load_config: the dev profile first, so the user's win."""
    if not args.dev:
        return list(args.overrides)
    from kbroker.config.profile import DEV_PROFILE

    return [f"{k}={v}" for k, v in DEV_PROFILE.items()] + list(args.overrides)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"ts": round(record.created, 3), "level": record.levelname,
                 "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def use_json_logs() -> None:
    for handler in logging.getLogger().handlers:
        handler.setFormatter(JsonFormatter())


def ready_info(broker, config) -> dict:
    listeners = {}
    for name in broker.bound:
        host, port = broker.advertised_endpoint(name)
        listeners[name] = {"host": host, "port": port, "bind": broker.bound[name][0]}
    return {
        "bootstrap_servers": ",".join(f"{l['host']}:{l['port']}" for l in listeners.values()),
        "listeners": listeners,
        "pid": os.getpid(),
        "data_dirs": [os.path.abspath(d) for d in config.log_dirs],
        "cluster_id": broker.controller.image.cluster_id,
        "node_id": broker.node_id,
        "http": broker.http.url if broker.http is not None else None,  # console and /metrics
        "schema_registry": (broker.schema_registry.url if broker.schema_registry is not None
                            else None),  # Confluent's REST API (kbroker.schema_registry)
        "version": VERSION,
    }


def on_ready(args: argparse.Namespace, config, started: float):
    """The callback ``run_broker`` calls once the listeners are bound."""

    def announce(broker) -> None:
        info = ready_info(broker, config)
        if args.ready_file:
            write_atomically(args.ready_file, json.dumps(info, indent=2) + "\n")
        if args.log_format == "json":
            print(json.dumps({"event": "ready", **info}), flush=True)
        else:
            print(banner(info, dev=args.dev, seconds=time.monotonic() - started), flush=True)

    return announce


def banner(info: dict, *, dev: bool, seconds: float) -> str:
    listeners = ", ".join(f"{name} {l['host']}:{l['port']}" for name, l in info["listeners"].items())
    return "\n".join([
        f"kbroker {VERSION}{' (dev profile)' if dev else ''} ready in {seconds:.2f} s",
        f"  bootstrap servers  {info['bootstrap_servers']}",
        f"  listeners          {listeners}",
        f"  data dir           {', '.join(info['data_dirs'])}",
        *([f"  schema registry    {info['schema_registry']}"] if info.get("schema_registry")
          else []),
        f"  stop               Ctrl-C, or kill {info['pid']} (SIGTERM: clean shutdown)",
        f"  try                kbroker topic create demo -p 3 --brokers {info['bootstrap_servers']}",
        "                     kbroker --help",
    ])


def write_atomically(path: str, text: str) -> None:
    temp = f"{path}.tmp{os.getpid()}"
    with open(temp, "w") as f:
        f.write(text)
    os.replace(temp, path)
