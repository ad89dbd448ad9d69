"""The one exception type for mistakes in user input (scenario, overrides, data, trace files).

The CLI turns it into a single line ``simfl: <where>: <message>`` and exit
code 2; anything else that escapes is a bug and keeps its traceback.
"""

from __future__ import annotations


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
