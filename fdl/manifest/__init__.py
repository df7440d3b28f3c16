"""The project manifest: ``fdl.yml`` with overlays, explainable value by value.

Public API::

    manifest = load_manifest(env="ci")
    manifest.get("libtorch.build.archs")
    manifest.origin("libtorch.build.archs")   # Origin(file, line, column, layer)
    manifest.explain("commands.test")          # what set it, what it overrode
"""

from __future__ import annotations

from fdl.manifest._explain import Contribution, Explanation
from fdl.manifest._layers import (
    Candidate,
    Discovered,
    Layer,
    discover,
    list_environments,
    working_directory,
)
from fdl.manifest._manifest import Manifest, load_directory_manifest, load_manifest, split_key
from fdl.manifest._nodes import LayerKind, MapNode, Node, Origin, ScalarNode, SeqNode

__all__ = [
    "Candidate",
    "Contribution",
    "Discovered",
    "Explanation",
    "Layer",
    "LayerKind",
    "Manifest",
    "MapNode",
    "Node",
    "Origin",
    "ScalarNode",
    "SeqNode",
    "discover",
    "list_environments",
    "load_directory_manifest",
    "load_manifest",
    "split_key",
    "working_directory",
]
