"""libtorch variants: side by side under ``<root>/libtorch/``, one active."""
