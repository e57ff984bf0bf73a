"""kbroker: a Kafka wire-protocol-compatible broker in Python (asyncio)."""

# The one place the version is written: pyproject.toml reads it from here (setuptools' ``attr``),
# so the broker knows its version without importlib.metadata (tens of milliseconds at start).
__version__ = "0.1.0"
