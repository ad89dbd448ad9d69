"""Scenario files shipped inside the package, so an installed simfl runs them without the source tree.

``quickstart.yaml`` is a copy of the project's ``scenarios/quickstart.yaml``
(a test keeps the two identical); ``simfl quickstart`` runs it.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def shipped(name: str) -> Path:
    """The path of the shipped scenario ``name`` (e.g. ``quickstart``)."""
    return HERE / f"{name}.yaml"
