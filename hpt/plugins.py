"""Plugins: modules that register strategies, tasks, providers or corpus rules when imported.

They come from ``--plugin MODULE`` (or ``plugins = [...]`` in a run config) and from every
installed package that declares an entry point in the ``hpt.plugins`` group, as pytest and
inspect find theirs::

    [project.entry-points."hpt.plugins"]
    mytools = "mytools.hpt_plugin"

An entry point may name a module (importing it registers) or a callable, which is called
with no arguments."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points

from hpt.errors import HptError

GROUP = "hpt.plugins"
_loaded: set[str] = set()


class PluginError(HptError, ImportError):
    """A plugin could not be loaded: the message names it and what to check."""


def import_plugin(module: str) -> None:
    """Import ``module`` once; a failure names the plugin."""
    if module in _loaded:
        return
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise PluginError(
            f"cannot import plugin {module!r} ({exc}); is it on PYTHONPATH or installed?"
        ) from None
    except Exception as exc:  # a plugin's own bug must not look like hpt's
        raise PluginError(
            f"plugin {module!r} failed while loading: {type(exc).__name__}: {exc}"
        ) from None
    _loaded.add(module)


def _load_entry_point(ep: EntryPoint) -> None:
    key = f"{GROUP}:{ep.name}={ep.value}"
    if key in _loaded:
        return
    where = f"entry point {ep.name!r} ({ep.value}) of {ep.dist.name if ep.dist else 'a package'}"
    try:
        loaded = ep.load()
        if callable(loaded):
            loaded()
    except Exception as exc:
        raise PluginError(
            f"{where} in group {GROUP!r} failed: {type(exc).__name__}: {exc}; uninstall the "
            f"package or fix it"
        ) from None
    _loaded.add(key)


def installed_plugins() -> list[EntryPoint]:
    return sorted(entry_points(group=GROUP), key=lambda ep: ep.name)


def load_plugins(modules: Iterable[str] = (), *, installed: bool = True) -> None:
    """Load the installed packages' plugins, then ``modules`` (so a command-line plugin can
    replace what a package registered, saying so: ``replace=True``)."""
    if installed:
        for ep in installed_plugins():
            _load_entry_point(ep)
    for module in modules:
        import_plugin(module)
