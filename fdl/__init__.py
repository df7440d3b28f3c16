"""fdl: toolchain for libtorch training projects."""

__version__ = "0.5.0"
