"""Waiting for a pool to reach a state, in the tests."""

import time
from typing import Callable, Optional, TypeVar

_T = TypeVar("_T")


def wait_until(what: str, check: Callable[[], Optional[_T]], timeout: float = 60) -> _T:
    """``check()``'s first true answer, asked every 0.2 s; an AssertionError
    naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"{what}: not after {timeout} s")
