"""Readers of the file formats libtorch variants come in, below :mod:`fdl.libtorch`.

- :mod:`fdl.formats.wheel`: wheel file names, ``METADATA``, ``RECORD``, ``version.py``
  and the ``==`` pins of ``Requires-Dist`` (pure functions of text).
- :mod:`fdl.formats.ranged`: members of remote wheels read with HTTP Range requests,
  the ranges kept in a cache, every member checked (CRC-32, ``RECORD``).
- :mod:`fdl.formats.oci`: OCI image references, layers (deterministic tars, gzip or
  zstd), configs and manifests, and the checks a pulled image passes before it is used.
- :mod:`fdl.formats.templates`: generated files kept as template files under
  ``fdl/data/``, filled with values that pass :mod:`fdl._grammar`.

ELF, fatbin and offload-bundle readers are :mod:`fdl.binaries`. Nothing here knows what a
libtorch variant is: the sources of :mod:`fdl.libtorch.sources` are adapters over these.
"""
