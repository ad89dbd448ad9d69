"""The one exception type for mistakes in user input (scenario, overrides, data, trace files).

The CLI turns it into a single line ``simfl: <where>: <message>`` and exit
code 2; anything else that escapes is a bug and keeps its traceback.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from simfl import openmp

T = TypeVar("T")


class InputError(ValueError):
    """A user mistake: ``where`` names the file, field or option; ``message`` says what is wrong.

    A ``ValueError``, so that ``except ValueError`` around the Python API catches a bad scenario too;
    code inside simfl that catches ``ValueError`` from a library re-raises it first.
    """

    def __init__(self, where: str, message: str) -> None:
        super().__init__(where, message)  # both in args: the error survives pickling and copying
        self.where = where
        self.message = message

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class WorkerLost(Exception):
    """A worker process or Ray task running a unit ended without a word (killed, out of memory, node lost).

    Not a bug in simfl nor a user mistake: the CLI says which run it was and that the folder resumes.
    """

    def __init__(self, title: str, how: str) -> None:
        super().__init__(title, how)
        self.title = title
        self.how = how

    def __str__(self) -> str:
        return f"{self.title}: {self.how}"


class UserCodeFailed(Exception):
    """The user's own code that simfl runs (a Flower strategy or ClientApp) raised or answered wrongly (:func:`user_call`).

    Neither a bug in simfl nor a mistake in a file: the CLI says in one line which code failed for which
    client and round, and puts the traceback (``details``) into ``crash.txt``.
    """

    def __init__(self, where: str, message: str, details: str) -> None:
        super().__init__(where, message, details)
        self.where = where
        self.message = message
        self.details = details

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@contextlib.contextmanager
def as_field_error() -> Iterator[None]:
    """Within a pydantic validator: an :class:`InputError` raised by a check the run also makes becomes the
    ``ValueError`` pydantic reports at the field, with the same line."""
    try:
        yield
    except InputError as exc:
        raise ValueError(exc.message) from None


def user_call(where: str, what: str, call: Callable[[], T], returns: Callable[[Any], bool] | None = None,
              expected: str = "", seconds: float | None = None, limit: str = "") -> T:
    """``call()``, the user's own code (a Flower strategy's constructor or method, a ClientApp), and what it returned.

    The one place that decides that user code failed: whatever it raises (``SystemExit`` and other
    ``BaseException`` subclasses too), or a returned value that ``returns`` refuses, becomes
    :class:`UserCodeFailed` naming ``what`` (the code and the call), the exception or the value (and
    ``expected``, what it should have returned), with the traceback as details. Ctrl-C and SIGTERM pass,
    and so does an :class:`InputError` raised through the code by a simfl function it called.

    With ``seconds``, the call runs in a daemon thread of its own (in a copy of the caller's context
    variables) while this thread waits at most that long: a call still running then is
    :class:`UserCodeFailed` naming ``limit`` (the option that sets it), with the call's stack as details.
    Python cannot stop a thread, so such a call is left to itself (it ends with the process); waiting in
    a thread rather than on a signal works in any thread and cannot be caught by the code it stops.
    """
    if seconds is None:
        value = _guarded(where, what, call)
    else:
        value = _within(where, what, lambda: _guarded(where, what, call), seconds, limit)
    if returns is not None and not returns(value):
        raise refused(where, what, value, expected)
    return value


def refused(where: str, what: str, value: Any, expected: str, did: str = "returned") -> UserCodeFailed:
    """The :class:`UserCodeFailed` for a value the user's code gave (``what`` ``did`` ``value``) that is not
    ``expected``; the value in whole as details."""
    whole = _text(repr, value)
    flat = " ".join(whole.split())  # a repr over several lines (a record's) stays on the one line
    shown = flat if len(flat) <= 60 else flat[:57] + "..."
    return UserCodeFailed(where, f"{what} {did} {type(value).__name__} {shown}, not {expected}",
                          f"{what} {did} this {type(value).__name__}:\n{whole[:100_000]}\n")


def _guarded(where: str, what: str, call: Callable[[], T]) -> T:
    """``call()``; what it raises (but Ctrl-C, SIGTERM and simfl's own refusals) as :class:`UserCodeFailed`."""
    try:
        return call()
    except (InputError, UserCodeFailed, KeyboardInterrupt):
        raise
    except BaseException as exc:
        text = _text(str, exc).strip().replace("\n", " ")
        raise UserCodeFailed(where, f"{what} raised {type(exc).__name__}{': ' + text if text else ''}",
                             traceback.format_exc()) from None


def _within(where: str, what: str, call: Callable[[], T], seconds: float, limit: str) -> T:
    """``call()`` in a daemon thread, waited for at most ``seconds`` (see :func:`user_call`)."""
    context = contextvars.copy_context()
    done = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = context.run(call)
        except BaseException as exc:  # handed to the waiting thread, which raises it
            box["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=run, name="simfl-user-call", daemon=True)
    openmp.release()  # this thread waits while the call computes: its idle OpenMP pool would slow the call's
    worker.start()
    if not done.wait(seconds):
        raise overran(where, what, worker, seconds, limit)
    if "error" in box:
        error = box.pop("error")
        raise error
    return box["value"]  # type: ignore[no-any-return]


def overran(where: str, what: str, thread: threading.Thread, seconds: float, limit: str) -> UserCodeFailed:
    """The :class:`UserCodeFailed` of user code still running in ``thread`` after ``seconds``, the limit the option
    ``limit`` sets; the thread's stack as details."""
    frame = sys._current_frames().get(thread.ident or -1)
    stack = "".join(traceback.format_stack(frame)) if frame is not None else "(its stack is gone)\n"
    return UserCodeFailed(where, f"{what} was still running after {seconds:g} s, the limit {limit} sets "
                          "(raise it for slower code)", f"{what} was still running after {seconds:g} s, here:\n{stack}")


def _text(show: Callable[[Any], str], value: Any) -> str:
    """``show(value)``, or nothing when the user's ``__str__``/``__repr__`` fails too."""
    try:
        return show(value)
    except Exception:
        return ""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that ``kill PID`` stops a command exactly as Ctrl-C does.

    A ``KeyboardInterrupt``: every place that leaves a resumable folder on Ctrl-C does so here too.
    """

    signal_name = "SIGTERM"


class NoSpace(InputError):
    """A write failed for want of room: the disk or quota is full, or a file-size limit (``ulimit -f``) was hit.

    A problem of the machine, not a bug: ``where`` names the file being written, which is left as it
    was before the write (a temporary file removed, an appended file cut back), so the folder resumes.
    """


FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
"""The errors a full disk, a file-size limit or a full quota give."""


def no_space(exc: OSError, path: object) -> NoSpace | None:
    """The :class:`NoSpace` for an OSError that says the disk, quota or file-size limit is full (else None)."""
    if exc.errno not in FULL_ERRNOS:
        return None
    return NoSpace(str(path), f"cannot be written: {exc.strerror or exc} (the disk or quota is full, or a file-size "
                   "limit was reached)")
