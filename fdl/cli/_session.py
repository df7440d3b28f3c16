"""What one invocation knows: global options, console, environment, manifest."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from fdl.cli._console import Console
from fdl.cli._globals import GlobalOptions
from fdl.errors import ManifestNotFound

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from fdl.libtorch import LibtorchSettings
    from fdl.manifest import Discovered, Layer, Manifest, Node
    from fdl.manifest.schema import Obj
    from fdl.paths import Context

__all__ = ["Session", "install"]


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


class Session:
    """State shared by the command that runs in this process.

    Attributes:
        options: The global options.
        console: Where output goes.
        cwd: The directory fdl acts in (``-C`` applied).
        environ: The process environment.
        interactive: Whether prompts may be shown (stdin and stderr are terminals).
    """

    def __init__(
        self,
        options: GlobalOptions,
        console: Console,
        cwd: Path,
        environ: Mapping[str, str],
        interactive: bool | None = None,
    ) -> None:
        self.options = options
        self.console = console
        self.cwd = cwd
        self.environ = environ
        self.interactive = _interactive() if interactive is None else interactive
        self._manifests: dict[tuple[str | None, tuple[str, ...]], Manifest] = {}
        # the command words from the root manifest to the nested one fdl started in
        self.nested_words: list[str] = []
        self.discovered_here = cwd

    @property
    def env(self) -> str | None:
        """The selected environment: ``--env``/``@NAME``, else ``$FDL_ENV``."""
        if self.options.env:
            return self.options.env
        return self.environ.get("FDL_ENV") or None

    def discover(self) -> Discovered:
        """Find the manifest file, handling example files as documented.

        With only ``fdl.yml.example`` present: in a terminal, offer to copy it;
        otherwise use it read-only and say so once.
        """
        from fdl.manifest import Discovered, discover

        found = discover(self.cwd, self.options.manifest)
        if self.options.manifest is None:
            # Inside a nested manifest's directory the project is the enclosing one; the
            # words that lead to the nested manifest let `fdl <its command>` run here.
            from fdl.tasks import nesting

            root, self.nested_words = nesting(found.path)
            self.discovered_here = found.path.parent
            if root != found.path:
                found = Discovered(root, example=root.suffix in (".example", ".dist"))
        if not found.example or self.options.manifest is not None:
            return found
        target = found.path.with_name(found.path.name.rsplit(".", 1)[0])
        if self.interactive:
            self.console.stderr.write(
                f"fdl: found {found.path.name} but no {target.name}. Copy it to {target.name}? [Y/n] "
            )
            self.console.stderr.flush()
            answer = sys.stdin.readline().strip().lower()
            if answer in ("", "y", "yes"):
                import shutil

                shutil.copyfile(found.path, target)
                self.console.info(f"fdl: created {target} (edit it to customise)")
                return Discovered(target)
        self.console.note(
            f"using {found.path.name} read-only (no {target.name}); copy it to {target.name} to customise",
            once_key="example",
        )
        return found

    def manifest(self, env: str | None = None, *, validate: bool = True) -> Manifest:
        """The merged manifest for ``env`` (default: the selected environment).

        Raises:
            ManifestError: not found, invalid, or the overlay does not exist.
        """
        from fdl.manifest import build_manifest

        chosen = env if env is not None else self.env
        key = (chosen, tuple(self.options.sets) + (("validate",) if validate else ()))
        cached = self._manifests.get(key)
        if cached is not None:
            return cached
        discovered = self.discover()
        manifest = build_manifest(
            discovered,
            env=chosen,
            environ=self.environ,
            sets=self.options.sets,
            schema=_root_schema() if validate else None,
            derived=(_recipe_layer,),
            env_aliases=_env_aliases(),
        )
        self._manifests[key] = manifest
        return manifest

    def libtorch_context(self) -> Context:
        """Where libtorch variants live for this invocation.

        Inside a project, the directory of its root manifest: the same project the
        task runner, images and CI use, also when fdl runs in a nested manifest's
        directory or with ``-f``. Outside any project, the global home.
        """
        from fdl.paths import Context, resolve_context

        try:
            found = self.discover()
        except ManifestNotFound:
            return resolve_context(self.cwd, self.environ)
        if self.env is not None:
            # An environment that does not exist is an error here too, not ignored.
            from fdl.manifest import find_overlay

            find_overlay(found.directory, self.env, required=True)
        return Context(found.directory, project=True)

    def confirm(self, question: str, *, default: bool = False) -> bool:
        """Ask ``question`` on the terminal; Enter takes ``default``. Only call it when
        :attr:`interactive`."""
        self.console.stderr.write(f"{question} {'[Y/n]' if default else '[y/N]'} ")
        self.console.stderr.flush()
        answer = sys.stdin.readline().strip().lower()
        return default if not answer else answer in ("y", "yes")

    def libtorch_settings(self) -> LibtorchSettings:
        """The project's ``libtorch.torch/variant/mirror`` (``$FDL_LIBTORCH_MIRROR`` is a layer
        of the manifest; outside a project it is the mirror)."""
        from fdl.libtorch import project_settings

        return project_settings(self.manifest_or_none(), self.environ, self.cwd)

    def manifest_or_none(self) -> Manifest | None:
        """The manifest, or None when there is no manifest at all (other errors raise)."""
        try:
            return self.manifest()
        except ManifestNotFound:
            return None


def _recipe_layer(merged: Node | None, directory: Path) -> Layer | None:
    """The build recipe ``libtorch.build.recipe`` names, as the manifest's lowest layer, so
    ``config show/explain`` give its values with the recipe's file:line. A recipe that
    cannot be read adds nothing here: ``fdl libtorch build`` reports it, at that line."""
    from fdl.manifest import ScalarNode, node_at

    named = node_at(merged, ("libtorch", "build", "recipe")) if merged is not None else None
    if not isinstance(named, ScalarNode) or named.value is None:
        return None  # the common case costs no import
    from fdl.errors import FdlError
    from fdl.libtorch.recipes import recipe_layer

    try:
        return recipe_layer(merged, directory)
    except FdlError:
        return None


def _env_aliases() -> dict[str, tuple[str, ...]]:
    from fdl.manifest.sections import env_aliases

    return env_aliases()


def _root_schema() -> Obj:
    from fdl.manifest.sections import root_spec

    return root_spec()


def install(
    options: GlobalOptions, console: Console, environ: Mapping[str, str] | None = None
) -> Session:
    """Create the session for this invocation."""
    env = os.environ if environ is None else environ
    cwd = Path.cwd()
    if options.directory is not None:
        from fdl.manifest import working_directory

        cwd = working_directory(cwd, options.directory)
    return Session(options=options, console=console, cwd=cwd, environ=env)
