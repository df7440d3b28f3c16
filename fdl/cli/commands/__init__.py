"""Typer apps of the built-in command groups (imported lazily by ``fdl.cli``)."""
