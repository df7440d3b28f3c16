"""A small schema language for manifests: validation with located errors,
normalisation to plain data, and export as JSON Schema.

Sections declare their shape with these specs (see ``fdl.manifest.sections``);
validation collects every problem with the ``file:line:col`` of the offending
value, suggests close matches for unknown keys and names the expected type. The value
grammars several sections share (a variable's name, a registry, a mount ...) are here too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from fdl._text import did_you_mean
from fdl.errors import ManifestError
from fdl.manifest._generated import (
    OWN_SECRET_CHECKS,
    generated_file_problem,
    secret_problem,
)
from fdl.manifest._nodes import MapNode, Node, ScalarNode, SeqNode, dotted, is_null, is_set
from fdl.manifest._spec import Checker, LazyPattern, Path, Spec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "ENV_NAME",
    "ENV_RULE",
    "MOUNT",
    "NO_SPACES",
    "PROFILE_NAME",
    "REGISTRY",
    "RELATIVE",
    "RELATIVE_RULE",
    "AnyValue",
    "Bool",
    "Checker",
    "Enum",
    "Float",
    "Int",
    "ListOf",
    "MapOf",
    "Obj",
    "OneOf",
    "Spec",
    "Str",
    "Version",
    "did_you_mean",
    "env_name",
    "for_generated_files",
    "generated_file_problem",
    "word",
]


class AnyValue(Spec):
    """Any value, passed through as plain data."""

    def __init__(self, description: str = "") -> None:
        self.description = description

    def check(self, node: Node, path: Path, checker: Checker) -> Any:
        return node.plain()

    def type_name(self) -> str:
        return "any value"

    def json_schema(self) -> dict[str, Any]:
        return self._doc({})


class Str(Spec):
    """A string, optionally matching ``pattern`` (numbers are not strings)."""

    def __init__(
        self,
        description: str = "",
        pattern: str | None = None,
        example: str = "",
        rule: str = "",
        script: bool = False,
    ) -> None:
        """``example`` (a value that matches ``pattern``) is the fix of a value that does
        not; ``rule`` says in words what ``pattern`` accepts (``no spaces``); ``script``:
        a multi-line script whose lines fdl joins itself (newlines allowed)."""
        self.multiline_script = script
        self.description = description
        self.pattern = LazyPattern(pattern) if pattern else None
        self.example = example
        self.rule = rule

    # Set by :func:`for_generated_files` on the sections whose values are written into
    # Dockerfiles, scripts and workflows.
    single_line = False
    no_expressions = False
    no_secrets = False

    def check(self, node: Node, path: Path, checker: Checker) -> Any:
        if not isinstance(node, ScalarNode) or not isinstance(node.value, str):
            checker.wrong_type(node, path, self)
            return None
        if self.single_line or self.no_expressions or self.no_secrets:
            problem = (
                generated_file_problem(
                    node.value, expressions=self.no_expressions, newlines=self.multiline_script
                )
                if self.single_line or self.no_expressions
                else None
            )
            if problem is None and self.no_secrets and path[-2:-1] not in OWN_SECRET_CHECKS:
                problem = secret_problem(node, path)
            if problem is not None:
                checker.fail(node, path, problem[0], problem[1])
                return node.value
        if self.pattern and not self.pattern.fullmatch(node.value):
            hint = f"e.g. {self.example}" if self.example else None
            what = f"{node.value!r} is not valid here" + (f" ({self.rule})" if self.rule else "")
            checker.fail(node, path, what, hint)
        return node.value

    def type_name(self) -> str:
        return "a string"

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string"}
        if self.pattern:
            schema["pattern"] = f"^(?:{self.pattern.pattern})$"
            message = _pattern_message(self.rule, self.example)
            if message:
                schema["patternErrorMessage"] = message
        return self._doc(schema)


# The value grammars several sections share, written once so that they cannot drift apart
# (here, not in a module of their own: this one is read on every command's start anyway).
ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
ENV_RULE = "a variable name: letters, digits and '_', not starting with a digit"
# an image profile (images:), as ci: and deploy: name one
PROFILE_NAME = r"[a-z0-9][a-z0-9_.-]*"
# host[:port]/namespace, where images and caches are pushed
REGISTRY = r"[a-zA-Z0-9.-]+(?::[0-9]+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
# host:container[:ro|rw]
MOUNT = r"[^:]+:/[^:]*(?::(?:ro|rw))?"
RELATIVE = r"(?!/)(?!.*(?:^|/)\.\.(?:/|$)).+"
RELATIVE_RULE = "a relative path that stays inside the repository (no leading '/', no '..')"
NO_SPACES = "no spaces"


def env_name(example: str, description: str = "") -> Str:
    """An environment variable's name."""
    return Str(description, pattern=ENV_NAME, example=example, rule=ENV_RULE)


def word(example: str, description: str = "") -> Str:
    """A value without spaces (a branch, a SLURM partition, a kubeconfig context)."""
    return Str(description, pattern=r"\S+", example=example, rule=NO_SPACES)


def _pattern_message(rule: str, example: str) -> str:
    """What editors show for a value the pattern refuses (the YAML language server's
    ``patternErrorMessage``): the rule and an example, as fdl's own error says them."""
    parts = [f"Not valid here: {rule}" if rule else "Not valid here"]
    if example:
        parts.append(f"e.g. {example}")
    return "; ".join(parts) if rule or example else ""


class Version(Spec):
    """A version such as ``12.8`` or ``2.13.0``; numbers keep their source text."""

    _PATTERN = re.compile(r"[0-9]+(\.[0-9]+){0,3}")

    def __init__(self, description: str = "") -> None:
        self.description = description

    def check(self, node: Node, path: Path, checker: Checker) -> Any:
        if not isinstance(node, ScalarNode) or isinstance(node.value, bool) or node.value is None:
            checker.wrong_type(node, path, self)
            return None
        text = node.text if not isinstance(node.value, str) else node.value
        if not self._PATTERN.fullmatch(text):
            checker.fail(node, path, f"{text!r} is not a version", "write it like 12.8 or 2.13.0")
        return text

    def type_name(self) -> str:
        return "a version (e.g. 12.8)"

    def json_schema(self) -> dict[str, Any]:
        return self._doc({"type": ["string", "number"], "pattern": r"^[0-9]+(\.[0-9]+){0,3}$"})


class Int(Spec):
    """An integer, optionally bounded."""

    def __init__(
        self, description: str = "", minimum: int | None = None, maximum: int | None = None
    ) -> None:
        self.description = description
        self.minimum = minimum
        self.maximum = maximum

    def check(self, node: Node, path: Path, checker: Checker) -> Any:
        if (
            not isinstance(node, ScalarNode)
            or isinstance(node.value, bool)
            or not isinstance(node.value, int)
        ):
            checker.wrong_type(node, path, self)
            return None
        if self.minimum is not None and node.value < self.minimum:
            checker.fail(node, path, f"must be at least {self.minimum}, got {node.value}")
        if self.maximum is not None and node.value > self.maximum:
            checker.fail(node, path, f"must be at most {self.maximum}, got {node.value}")
        return node.value

    def type_name(self) -> str:
        return "an integer"

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "integer"}
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        return self._doc(schema)


class Float(Spec):
    """A number (integers accepted)."""

    def __init__(self, description: str = "") -> None:
        self.description = description

    def check(self, node: Node, path: Path, checker: Checker) -> Any:
        value = node.value if isinstance(node, ScalarNode) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            checker.wrong_type(node, path, self)
            return None
        return float(value)

    def type_name(self) -> str:
        return "a number"

    def json_schema(self) -> dict[str, Any]:
        return self._doc({"type": "number"})


class Bool(Spec):
    """``true`` or ``false``."""

    def __init__(self, description: str = "") -> None:
        self.description = description

    def check(self, node: Node, path: Path, checker: Checker) -> Any:
        if not isinstance(node, ScalarNode) or not isinstance(node.value, bool):
            checker.wrong_type(node, path, self)
            return None
        return node.value

    def type_name(self) -> str:
        return "true or false"

    def json_schema(self) -> dict[str, Any]:
        return self._doc({"type": "boolean"})


class Enum(Spec):
    """One of fixed string choices."""

    def __init__(self, choices: Sequence[str], description: str = "") -> None:
        self.choices = list(choices)
        self.description = description

    def check(self, node: Node, path: Path, checker: Checker) -> Any:
        if not isinstance(node, ScalarNode) or node.value is None:
            checker.wrong_type(node, path, self)
            return None
        text = node.text
        if text not in self.choices:
            close = did_you_mean(text, self.choices)
            hint = f"did you mean {close!r}?" if close else None
            checker.fail(node, path, f"{text!r} is not one of {', '.join(self.choices)}", hint)
        return text

    def type_name(self) -> str:
        return "one of " + ", ".join(self.choices)

    def json_schema(self) -> dict[str, Any]:
        return self._doc({"enum": list(self.choices)})


def for_generated_files(spec: Spec, *, expressions: bool = False, lines: bool = True) -> Spec:
    """Mark every string (and free mapping key) under ``spec`` as written into generated
    files: secrets refused (outside ``env:``), control characters too unless ``lines`` is
    False (values fdl only records, never renders into a file), and with ``expressions``
    ``${{``."""
    seen: set[int] = set()

    def walk(node: Spec) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, Str):
            node.no_secrets = True
            node.single_line = node.single_line or lines
            node.no_expressions = node.no_expressions or expressions
        children: list[Spec] = []
        if isinstance(node, ListOf):
            children.append(node.item)
        elif isinstance(node, MapOf):
            node.single_line_keys = node.single_line_keys or lines
            node.no_expressions = node.no_expressions or expressions
            children.append(node.value)
        elif isinstance(node, OneOf):
            children.extend(node.options)
        elif isinstance(node, Obj):
            children.extend(node.fields.values())
        for child in children:
            walk(child)

    walk(spec)
    return spec


class ListOf(Spec):
    """A list whose items all match ``item``."""

    def __init__(self, item: Spec, description: str = "") -> None:
        self.item = item
        self.description = description

    def check(self, node: Node, path: Path, checker: Checker) -> Any:
        if not isinstance(node, SeqNode):
            checker.wrong_type(node, path, self)
            return None
        return [
            self.item.check(child, (*path, str(i)), checker) for i, child in enumerate(node.items)
        ]

    def type_name(self) -> str:
        return f"a list of {_plural(self.item.type_name())}"

    def json_schema(self) -> dict[str, Any]:
        return self._doc({"type": "array", "items": self.item.json_schema()})


class OneOf(Spec):
    """The first of several specs that the value matches."""

    def __init__(self, *options: Spec, description: str = "") -> None:
        self.options = options
        self.description = description

    def check(self, node: Node, path: Path, checker: Checker) -> Any:
        failures: list[Checker] = []
        for option in self.options:
            trial = Checker()
            value = option.check(node, path, trial)
            if not trial.errors:
                return value
            failures.append(trial)
        # Report the errors of the option whose shape matched, if any did.
        for option, trial in zip(self.options, failures, strict=True):
            if _shape_matches(option, node):
                checker.errors.extend(trial.errors)
                return None
        checker.wrong_type(node, path, self)
        return None

    def type_name(self) -> str:
        return " or ".join(option.type_name() for option in self.options)

    def json_schema(self) -> dict[str, Any]:
        return self._doc({"anyOf": [option.json_schema() for option in self.options]})


def _shape_matches(spec: Spec, node: Node) -> bool:
    if isinstance(spec, _Mapping):
        return isinstance(node, MapNode)
    if isinstance(spec, ListOf):
        return isinstance(node, SeqNode)
    if isinstance(spec, Str):  # a string refused for its contents, not its type
        return isinstance(node, ScalarNode) and isinstance(node.value, str)
    return False


def _plural(name: str) -> str:
    for article in ("a ", "an "):
        if name.startswith(article):
            name = name[len(article) :]
            break
    return name if name.endswith("s") else name + "s"


Validator = Callable[[MapNode, Path, Checker], None]


def _key_error(
    checker: Checker, node: MapNode, path: Path, key: str, what: str, hint: str | None
) -> None:
    """An error about a key itself (unknown, or not a valid name), at where the key is
    written."""
    checker.errors.append(
        ManifestError(
            f"{dotted((*path, key))}: {what}", location=node.key_origin(key).location(), hint=hint
        )
    )


class _Mapping(Spec):
    """What :class:`MapOf` and :class:`Obj` share: a mapping whose entries are checked
    one by one, a null value read as not set."""

    def check(self, node: Node, path: Path, checker: Checker) -> Any:
        if not isinstance(node, MapNode):
            checker.wrong_type(node, path, self)
            return None
        out: dict[str, Any] = {}
        for key, child in node.entries.items():
            spec = self._value_spec(node, path, key, checker)
            if spec is not None:
                out[key] = None if is_null(child) else spec.check(child, (*path, key), checker)
        self._check_whole(node, path, checker)
        return out

    def _value_spec(self, node: MapNode, path: Path, key: str, checker: Checker) -> Spec | None:
        """The spec of ``key``'s value, once what is wrong with the key itself is reported;
        None leaves the entry out."""
        raise NotImplementedError

    def _check_whole(self, node: MapNode, path: Path, checker: Checker) -> None:
        """Checks of the mapping as a whole, after its entries."""

    def type_name(self) -> str:
        return "a mapping"


class MapOf(_Mapping):
    """A mapping with free keys whose values match ``value``."""

    single_line_keys = False  # see for_generated_files
    no_expressions = False

    def __init__(
        self,
        value: Spec,
        description: str = "",
        key_pattern: str | None = None,
        key_example: str = "",
        key_rule: str = "",
    ) -> None:
        self.value = value
        self.description = description
        self.key_pattern = LazyPattern(key_pattern) if key_pattern else None
        self.key_example = key_example
        self.key_rule = key_rule

    def _value_spec(self, node: MapNode, path: Path, key: str, checker: Checker) -> Spec:
        problem = (
            generated_file_problem(key, expressions=self.no_expressions)
            if self.single_line_keys
            else None
        )
        if problem is not None:
            _key_error(checker, node, path, key, f"the key {problem[0]}", problem[1])
        elif self.key_pattern and not self.key_pattern.fullmatch(key):
            hint = f"e.g. {self.key_example}" if self.key_example else None
            what = f"{key!r} is not a valid name here" + (
                f" ({self.key_rule})" if self.key_rule else ""
            )
            _key_error(checker, node, path, key, what, hint)
        return self.value

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "object",
            "additionalProperties": {"anyOf": [self.value.json_schema(), {"type": "null"}]},
        }
        if self.key_pattern:
            names: dict[str, Any] = {"pattern": f"^(?:{self.key_pattern.pattern})$"}
            message = _pattern_message(self.key_rule, self.key_example)
            if message:
                names["patternErrorMessage"] = message.replace("Not valid here", "Not a valid name")
            schema["propertyNames"] = names
        return self._doc(schema)


# An open Obj's extra keys: passed through as plain data.
_PASSED = AnyValue()


class Obj(_Mapping):
    """A mapping with known keys; unknown keys are errors (with did-you-mean).

    Args:
        fields: Key -> spec. A ``null`` value always means "not set".
        required: Keys that must be present and not null.
        validators: Cross-field checks run after the fields validated.
        open_keys: Extra keys tolerated without a spec (passed through).
        renamed: Keys that older manifests used -> the fix to show (instead of a
            did-you-mean) when one appears.
    """

    def __init__(
        self,
        fields: Mapping[str, Spec],
        description: str = "",
        required: Sequence[str] = (),
        validators: Sequence[Validator] = (),
        open_keys: bool = False,
        renamed: Mapping[str, str] | None = None,
    ) -> None:
        self.fields = dict(fields)
        self.description = description
        self.required = tuple(required)
        self.validators = tuple(validators)
        self.open_keys = open_keys
        self.renamed = dict(renamed or {})

    def _value_spec(self, node: MapNode, path: Path, key: str, checker: Checker) -> Spec | None:
        spec = self.fields.get(key)
        if spec is None:
            if self.open_keys:
                return _PASSED
            close = did_you_mean(key, list(self.fields))
            known = ", ".join(self.fields)
            hint = f"did you mean {close!r}?" if close else f"known keys here: {known}"
            hint = self.renamed.get(key, hint)
            _key_error(checker, node, path, key, f"unknown key {key!r}", hint)
        return spec

    def _check_whole(self, node: MapNode, path: Path, checker: Checker) -> None:
        for key in self.required:
            # A present value refused for its contents has its own error already.
            if not is_set(node, key):
                checker.fail(node, path, f"missing required key {key!r}")
        for validator in self.validators:
            validator(node, path, checker)

    def json_schema(self) -> dict[str, Any]:
        properties = {
            key: {"anyOf": [spec.json_schema(), {"type": "null"}]}
            for key, spec in self.fields.items()
        }
        schema: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "additionalProperties": self.open_keys,
        }
        if self.required:
            schema["required"] = list(self.required)
        return self._doc(schema)
