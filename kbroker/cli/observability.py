"""``serve`` options for tracing, the HTTP port and the log format; each maps onto a broker
setting so the config table stays the one place they are defined.

- ``--trace [text|json]``  -> ``kbroker.trace`` (also switchable at run time through the Admin API)
- ``--trace-api NAME``, ``--trace-client ID`` (repeatable) -> ``kbroker.trace.apis`` / ``.client.ids``
- ``--http-port PORT``     -> ``http.port`` (0 picks a free port; the log names it)
- ``--log-format json``    one JSON object per log line (time, level, logger, message)
"""

from __future__ import annotations



def add_arguments(parser) -> None:
    parser.add_argument("--trace", nargs="?", const="text", choices=["text", "json"],
                        help="log every request and response decoded (default format: text)")
    parser.add_argument("--trace-api", action="append", default=[], metavar="NAME",
                        help="trace only this API (e.g. Produce); repeatable")
    parser.add_argument("--trace-client", action="append", default=[], metavar="CLIENT_ID",
                        help="trace only requests from this client id; repeatable")
    parser.add_argument("--http-port", type=int, metavar="PORT",
                        help="serve /healthz, /readyz, /metrics and the web console on PORT")
    if "--log-format" not in parser._option_string_actions:  # the dev profile's serve options
        parser.add_argument("--log-format", choices=["text", "json"], default="text",  # may have it
                            help="log lines as text (default) or one JSON object each")


def overrides(args) -> list[str]:
    """The ``key=value`` settings the options stand for (before ``--set``, so ``--set`` wins)."""
    out = []
    if args.trace:
        out.append(f"kbroker.trace={args.trace}")
    if args.trace_api:
        out.append(f"kbroker.trace.apis={','.join(args.trace_api)}")
    if args.trace_client:
        out.append(f"kbroker.trace.client.ids={','.join(args.trace_client)}")
    if args.http_port is not None:
        out.append(f"http.port={args.http_port}")
    return out


