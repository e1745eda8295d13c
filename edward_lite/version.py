"""The library's version (also in setup.py)."""

__version__ = "0.1.0"
