"""Kept for imports that predate :mod:`kbroker.config.log_settings`, where the derivation lives."""

from kbroker.config.log_settings import log_config_factory

__all__ = ["log_config_factory"]
