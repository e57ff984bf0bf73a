"""CRC-32C (Castagnoli), the checksum of record batches and producer-state snapshots: the C
function of the ``crc32c`` package, loaded without running the package's ``__init__``.

That ``__init__`` imports ``importlib.metadata`` to read the package's own version and its command
line module: about 30 ms of every broker start (a third of what serving needs to import) for a
string nobody reads. The extension module itself imports nothing; where it cannot be found this
way (another layout of the package), the ordinary import is used.
"""

from __future__ import annotations

import glob
import importlib.machinery
import importlib.util
import os


def _load():
    try:
        spec = importlib.util.find_spec("crc32c")  # finds the package without running it
        (where,) = spec.submodule_search_locations
        (path,) = [p for suffix in importlib.machinery.EXTENSION_SUFFIXES
                   for p in glob.glob(os.path.join(where, "_crc32c" + suffix))][:1]
        loader = importlib.machinery.ExtensionFileLoader("crc32c._crc32c", path)
        module = importlib.util.module_from_spec(
            importlib.util.spec_from_file_location("crc32c._crc32c", path, loader=loader))
        loader.exec_module(module)
        return module.crc32c
    except (ImportError, ValueError, TypeError, AttributeError):
        from crc32c import crc32c
        return crc32c


crc32c = _load()
