#!/usr/bin/env python3
"""What connections cost a kbroker process: RSS with N idle connections (each has sent one
ApiVersions request and been answered), and RSS under connections that declare large frames and
send little. Not a test (tests/server/test_limits.py asserts smaller bounds).

    .venv/bin/python tools/bench_connections.py [--connections 10000] [--liars 20]

Target from issue 11: 10,000 idle connections under 250 MB RSS.
"""

from __future__ import annotations

import argparse
import resource
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kbroker.protocol import messages  # noqa: E402
from kbroker.testing.procfs import memory_mb  # noqa: E402
from tests.broker_process import BrokerProcess  # noqa: E402
from tests.frames import request_frame  # noqa: E402


def api_versions_frame() -> bytes:
    body = messages.request_class(18)(client_software_name="bench", client_software_version="1")
    return request_frame(18, 3, body, 1, "bench-connections")


def read_answer(sock: socket.socket) -> None:
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    sock.recv(size, socket.MSG_WAITALL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--liars", type=int, default=20,
                        help="connections declaring a 100 MiB frame and sending 64 KiB")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    frame = api_versions_frame()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data").start()
        try:
            pid = broker.proc.pid
            start_rss = memory_mb(pid, "VmRSS")
            sockets = []
            began = time.monotonic()
            for i in range(args.connections):
                sock = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
                sock.sendall(frame)
                read_answer(sock)
                sockets.append(sock)
            idle_rss = memory_mb(pid, "VmRSS")
            print(f"{args.connections} idle connections: RSS {start_rss:.0f} MB -> {idle_rss:.0f} MB "
                  f"({(idle_rss - start_rss) * 1024 / args.connections:.1f} KiB each; "
                  f"opened in {time.monotonic() - began:.1f} s)")
            for sock in sockets:
                sock.close()
            time.sleep(1)
            before = memory_mb(pid, "VmRSS")
            liars = []
            for _ in range(args.liars):
                sock = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
                sock.sendall(struct.pack(">i", 100 << 20) + b"\0" * 65536)
                liars.append(sock)
            probe = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
            probe.sendall(frame)
            read_answer(probe)
            print(f"{args.liars} connections declaring 100 MiB frames: RSS {before:.0f} MB -> "
                  f"{memory_mb(pid, 'VmRSS'):.0f} MB")
            for sock in liars + [probe]:
                sock.close()
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
