"""The kbroker version (``kbroker.__version__``, which pyproject.toml reads too)."""

from kbroker import __version__ as VERSION

__all__ = ["VERSION"]
