"""Griffe extension for the API pages: Sphinx-style roles in docstrings become inline code.

simfl's docstrings name other objects as ``:class:`~simfl.launch.api.Results``` or
``:meth:`state```; the pages show them as code (``Results``, ``state``), the
``~`` keeping only the last dotted part, as Sphinx does.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|meth|func|mod|data|attr|obj|exc):`(~?)([^`]+)`")


def plain(text: str) -> str:
    """``text`` with every role replaced by inline code of its target."""
    return ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text)


class Roles(griffe.Extension):
    """Rewrites the roles of every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
