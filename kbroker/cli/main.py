"""``kbroker [serve] [--config FILE] [--set key=value ...] [--log-level LEVEL]``.

Exit codes: 0 clean shutdown, 2 bad usage or bad config (``kbroker: bad config: <message>``).
The broker module is imported only once the config is valid, keeping ``--help`` and config errors
instant.
"""

from __future__ import annotations

import argparse
import logging
import sys

LOG_FORMAT = "%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s"
LOG_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"
SUBCOMMANDS = ("serve",)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbroker", description="A Kafka-compatible broker.")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the broker (the default)")
    serve.add_argument("--config", "-c", metavar="FILE",
                       help="server.properties-style file (Kafka's broker config names)")
    serve.add_argument("--set", "-s", dest="overrides", metavar="KEY=VALUE", action="append",
                       default=[], help="override one config; repeatable, later wins")
    serve.add_argument("--log-level", default="INFO", type=str.upper,
                       choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
                       help="logging threshold (default INFO)")
    from kbroker.cli import observability
    observability.add_arguments(serve)
    return parser


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, LOG_DATE_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in SUBCOMMANDS + ("-h", "--help"):
        argv.insert(0, "serve")  # bare ``kbroker [options]`` means ``kbroker serve [options]``
    args = build_parser().parse_args(argv)
    return serve(args)


def serve(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    from kbroker.cli import observability
    from kbroker.config import ConfigError, load_config

    observability.apply_log_format(args)
    try:
        config = load_config(args.config, observability.overrides(args) + args.overrides)
    except ConfigError as exc:
        print(f"kbroker: bad config: {exc}", file=sys.stderr)
        return 2
    from kbroker.server.broker import run_broker

    try:
        run_broker(config)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
