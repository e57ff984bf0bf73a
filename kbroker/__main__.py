"""``python -m kbroker`` is the ``kbroker`` command."""

from kbroker.cli.main import run

run()
