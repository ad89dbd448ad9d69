"""Write the hostile-input suite's case counts at the end of a session (see tests/reliability/hostile.py)."""

from __future__ import annotations

import pytest

from tests.reliability.hostile import write_counts


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    write_counts()
