"""``python -m kbroker`` is the ``kbroker`` command."""

import sys

from kbroker.cli.main import main

sys.exit(main())
