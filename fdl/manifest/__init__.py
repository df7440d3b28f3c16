"""The project manifest: ``fdl.yml`` with overlays, explainable value by value.

Public API::

    manifest = load_manifest(env="ci")
    manifest.get("libtorch.build.archs")
    manifest.origin("libtorch.build.archs")   # Origin(file, line, column, layer)
    manifest.explain("commands.test")          # what set it, what it overrode
"""

from __future__ import annotations

from fdl._upward import EXAMPLE_SUFFIXES
from fdl.manifest._explain import Contribution, Explanation
from fdl.manifest._layers import (
    BASE_NAMES,
    MAX_MANIFEST_BYTES,
    Candidate,
    Discovered,
    Layer,
    discover,
    display_name,
    find_in_directory,
    find_overlay,
    list_environments,
    parse_text,
    read_layer,
    working_directory,
)
from fdl.manifest._manifest import (
    Manifest,
    build_manifest,
    load_directory_manifest,
    load_manifest,
    merge_layers,
    split_key,
)
from fdl.manifest._nodes import LayerKind, MapNode, Node, Origin, ScalarNode, SeqNode, node_at
from fdl.manifest._overrides import nested_layer, value_layer
from fdl.manifest._secrets import (
    MASK,
    is_secret_key,
    is_secret_node,
    redact,
    shown_text,
    token_kind,
)

__all__ = [
    "BASE_NAMES",
    "EXAMPLE_SUFFIXES",
    "MASK",
    "MAX_MANIFEST_BYTES",
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
    "build_manifest",
    "discover",
    "display_name",
    "find_in_directory",
    "find_overlay",
    "is_secret_key",
    "is_secret_node",
    "list_environments",
    "load_directory_manifest",
    "load_manifest",
    "merge_layers",
    "nested_layer",
    "node_at",
    "parse_text",
    "read_layer",
    "redact",
    "shown_text",
    "split_key",
    "token_kind",
    "value_layer",
    "working_directory",
]
