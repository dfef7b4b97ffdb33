"""A griffe extension for the API pages: the docstrings' Sphinx roles as links.

The docstrings follow numpydoc and name other objects with Sphinx roles
(``:func:`make_plan```, ``:class:`~optiq.plan.Plan```, ``:mod:`.units```), which Python's
``help()`` shows as they are but mkdocstrings would print literally. This extension
resolves each name in the scope of the object whose docstring holds it (as Sphinx does) and
writes an optional cross-reference, which mkdocs-autorefs turns into a link when the
target has a page, and into plain code otherwise.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|data|mod|exc|obj|const):`(~?)([\w.]+)(?:\(\))?`")


def _module_path(obj: griffe.Object) -> str:
    module = obj if obj.is_module else obj.module
    if module.is_package or module.is_subpackage or module.parent is None:
        return module.path
    return module.parent.path


def _resolve(obj: griffe.Object, name: str) -> str:
    """The full path ``name`` means in the docstring of ``obj`` (the name itself if unknown)."""
    if name.startswith("."):
        return _module_path(obj) + name
    if name.split(".")[0] in ("optiq", "numpy", "scipy", "mpi4py", "networkx"):
        return name
    head, _, rest = name.partition(".")
    try:
        full = obj.resolve(head)
    except Exception:  # griffe's NameResolutionError, or a member it cannot see
        return name
    return f"{full}.{rest}" if rest else full


def _replace(obj: griffe.Object, text: str) -> str:
    def link(match: re.Match[str]) -> str:
        tilde, name = match.groups()
        shown = name.rsplit(".", 1)[-1] if tilde else name.lstrip(".")
        return (f'<autoref identifier="{html.escape(_resolve(obj, name))}" optional>'
                f"<code>{html.escape(shown)}</code></autoref>")

    return ROLE.sub(link, text)


class SphinxRoles(griffe.Extension):
    """Rewrite every role in the package's docstrings once the package is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        seen: set[int] = set()
        todo: list[griffe.Object] = [pkg]
        while todo:
            obj = todo.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = _replace(obj, obj.docstring.value)
            todo.extend(member for member in obj.members.values() if not member.is_alias)
