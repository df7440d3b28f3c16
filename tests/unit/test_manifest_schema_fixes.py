"""Every value the schema refuses by its pattern gets a fix: an example that the pattern
accepts (a pattern without one printed "'UPPER' is not valid here" and nothing else)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fdl.errors import ManifestErrors
from fdl.manifest import load_manifest
from fdl.manifest.schema import MapOf, Spec, Str
from fdl.manifest.sections import root_spec


def _specs(spec: Spec, path: str, seen: set[int]) -> Iterator[tuple[str, Spec]]:
    if id(spec) in seen:
        return
    seen.add(id(spec))
    yield path, spec
    for name, value in vars(spec).items():
        children: list[tuple[str, object]] = []
        if isinstance(value, dict):
            children = [(f"{path}.{key}", child) for key, child in value.items()]
        elif isinstance(value, (list, tuple)):
            children = [(f"{path}[{name}]", child) for child in value]
        else:
            children = [(f"{path}.<{name}>", value)]
        for child_path, child in children:
            if isinstance(child, Spec):
                yield from _specs(child, child_path, seen)


PATTERNED = [
    (path, spec)
    for path, spec in _specs(root_spec(), "", set())
    if (isinstance(spec, Str) and spec.pattern) or (isinstance(spec, MapOf) and spec.key_pattern)
]


def test_the_walk_reaches_the_patterned_fields_of_every_section() -> None:
    sections = {path.split(".")[1] for path, _ in PATTERNED}
    assert {"images", "ci", "bench", "deploy", "libtorch", "commands"} <= sections
    assert len(PATTERNED) > 60


@pytest.mark.parametrize(("path", "spec"), PATTERNED, ids=[path for path, _ in PATTERNED])
def test_a_patterned_field_has_an_example_its_pattern_accepts(path: str, spec: Spec) -> None:
    if isinstance(spec, Str):
        assert spec.pattern is not None
        assert spec.example, f"{path}: a pattern without an example gives no fix"
        assert spec.pattern.fullmatch(spec.example), f"{path}: {spec.example!r}"
    else:
        assert isinstance(spec, MapOf) and spec.key_pattern is not None
        names = [name.strip("` ") for name in spec.key_example.split(",") if name.strip("` ")]
        assert names, f"{path}: key names without an example give no fix"
        for name in names:
            assert spec.key_pattern.fullmatch(name), f"{path}: {name!r}"


def test_a_kubernetes_name_says_what_it_may_hold_and_gives_one(tmp_path: Path) -> None:
    (tmp_path / "fdl.yml").write_text(
        "deploy:\n  k8s:\n    kind: kubernetes\n    namespace: ML_Team\n"
        "    node-selector: {'a b': x}\n"
    )
    with pytest.raises(ManifestErrors) as caught:
        load_manifest(tmp_path)
    errors = {str(error).split(":")[3].strip(): error for error in caught.value.errors}
    namespace = errors["deploy.k8s.namespace"]
    assert "lowercase letters, digits and '-'" in str(namespace)
    assert namespace.hint == "e.g. ml"
    label = errors["deploy.k8s.node-selector.a b"]
    assert label.hint and "nvidia.com/gpu.family" in label.hint
