"""Compiled kernels that cost nothing until called: numba is imported when a kernel first runs, not with its module.

Most runs call none of simfl's compiled kernels (they serve populations, hash stream paths in bulk and fuse
OrthoFL's calibration), yet importing numba costs a few tenths of a second of every process. :func:`njit` takes
numba's options and leaves a :class:`Kernel` in the module; its first call compiles every kernel of that module
(``numba.njit`` with the same options and numba's on-disk cache) and puts the compiled ones in the module's
namespace, so compiled kernels calling each other see compiled callees and Python callers of the module read
them directly from then on. A caller that imported a kernel by name keeps the :class:`Kernel`, which passes
its calls on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])


class Kernel:
    """A function to be compiled by ``numba.njit(**options)`` at its (or a module neighbour's) first call."""

    def __init__(self, func: Callable[..., Any], options: dict[str, Any]) -> None:
        self.py_func = func
        self.options = options
        self.compiled: Callable[..., Any] | None = None
        self.__doc__ = func.__doc__
        self.__name__ = func.__name__
        self.__qualname__ = func.__qualname__
        self.__module__ = func.__module__

    def __call__(self, *args: Any) -> Any:
        return (self.compiled or self.compile())(*args)

    def compile(self) -> Callable[..., Any]:
        """Compile every kernel of this one's module and put them in its namespace; this one's compiled form."""
        import numba

        namespace = self.py_func.__globals__
        for name, value in list(namespace.items()):
            if isinstance(value, Kernel) and value.py_func.__globals__ is namespace:
                if value.compiled is None:
                    value.compiled = numba.njit(**value.options)(value.py_func)
                namespace[name] = value.compiled
        assert self.compiled is not None
        return self.compiled


def njit(**options: Any) -> Callable[[F], F]:
    """``numba.njit(**options)``, compiled at first call (:class:`Kernel`)."""

    def wrap(func: F) -> F:
        return cast(F, Kernel(func, options))

    return wrap
