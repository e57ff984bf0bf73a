"""The kbroker version: the installed distribution's, else the source tree's."""

from importlib import metadata

try:
    VERSION = metadata.version("kbroker")
except metadata.PackageNotFoundError:  # running from a checkout that is not installed
    VERSION = "0.1.0"
