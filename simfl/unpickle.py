"""Reading pickles that users exchange (datasets, traces) without running code from them.

A pickle names the functions that rebuild its objects, and ``pickle.loads`` calls whatever it
names: a CIFAR batch or a FedScale trace holding ``os.system`` runs it when read. The unpickler
here resolves only plain containers and, where asked, numpy arrays; any other name refuses the
file before anything in it is called.

Admitted: ``dict``, ``list``, ``tuple``, ``set``, ``frozenset`` (and the numbers, strings, bytes
and booleans pickle encodes without a name); ``_codecs.encode``, with which a protocol-2 pickle
written by Python 3 stores bytes (it only turns a string into bytes); with ``arrays``, the
names numpy pickles an array or scalar with (``_reconstruct``, ``_frombuffer``, ``ndarray``,
``dtype``, ``scalar``, under ``numpy.core`` and ``numpy._core``), whose rebuilt array class can
itself only be ``ndarray``.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

_PLAIN = {(m, n) for m in ("builtins", "__builtin__") for n in ("dict", "list", "tuple", "set", "frozenset")} | {
    ("_codecs", "encode")}
"""``__builtin__``: the name protocols 0-2 give ``builtins`` (``pickle`` maps it back when it resolves it)."""
_ARRAYS = {(f"numpy.{core}.multiarray", n) for core in ("core", "_core") for n in ("_reconstruct", "scalar")} | {
    (f"numpy.{core}.numeric", "_frombuffer") for core in ("core", "_core")} | {("numpy", "ndarray"), ("numpy", "dtype")}
"""``_frombuffer``: how protocol 5 stores an array (bytes, dtype, shape, order)."""


class Refused(pickle.UnpicklingError):
    """The pickle names something other than plain data."""


class _Restricted(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, allowed: set[tuple[str, str]], encoding: str) -> None:
        super().__init__(file, encoding=encoding)
        self.allowed = allowed

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.allowed:
            return super().find_class(module, name)
        raise Refused(f"refusing {module}.{name}: only plain data{' and numpy arrays' if _ARRAYS <= self.allowed else ''} "
                      "are read from data files")


def loads(raw: bytes, arrays: bool = False, encoding: str = "ASCII") -> Any:
    """The plain data (and, with ``arrays``, numpy arrays) pickled in ``raw``; :class:`Refused` for anything else.

    Other failures on damaged input are the ``pickle`` module's own (many exception types): callers
    turn any of them into a one-line error naming the file.
    """
    allowed = _PLAIN | _ARRAYS if arrays else set(_PLAIN)
    return _Restricted(io.BytesIO(raw), allowed, encoding).load()
