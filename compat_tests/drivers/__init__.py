"""Client drivers for the compatibility matrix; see registry.py."""
