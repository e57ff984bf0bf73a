"""kbroker.protocol.crc: the crc32c package's C function, loaded without the package's __init__
(issue 35: start-up time), giving the same checksums."""

from __future__ import annotations

import os
import subprocess
import sys

import crc32c as package

from kbroker.protocol.crc import crc32c


def test_the_same_checksums_as_the_package():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    for size in (0, 1, 7, 64, 4096, 100_003):
        data = os.urandom(size)
        assert crc32c(data) == package.crc32c(data)
        assert crc32c(data, crc32c(b"tail")) == package.crc32c(data, package.crc32c(b"tail"))


def test_loading_it_reads_no_package_metadata():
    code = ("import sys; from kbroker.protocol.crc import crc32c; crc32c(b'x'); "
            "print('importlib.metadata' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
