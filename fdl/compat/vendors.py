"""Which GPU stack a libtorch variant targets: ``cpu``, ``nvidia`` or ``amd``.

The rule lives in :mod:`fdl._vendors` (importing it does not load this package, which
``fdl libtorch list`` must not pay for); this is its place among the compatibility facts.
"""

from __future__ import annotations

from typing import Literal

from fdl._vendors import classify_variant_label, vendor_of_variant

__all__ = ["Vendor", "classify_variant_label", "vendor_of_variant"]

Vendor = Literal["cpu", "nvidia", "amd"]
