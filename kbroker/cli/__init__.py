"""Command line: ``kbroker serve`` (the default) and, later, admin subcommands.

``main.py`` parses arguments, loads the config and hands it to ``kbroker.server.broker.run_broker``.
It imports nothing heavy at module level so ``kbroker`` starts fast.
"""
