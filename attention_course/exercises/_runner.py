"""Run a learner's function with a time limit, so a loop that never ends cannot hang a notebook.

The function runs in a daemon thread (a signal timer cannot interrupt a long C call). When the
time is up, :class:`TimeLimitExceeded` is raised inside it (``PyThreadState_SetAsyncExc``); a
thread stuck in one C call cannot be stopped and is reported as possibly still running. The
notebook's stop button stops the worker and propagates; ``SystemExit`` and ``KeyboardInterrupt``
raised by the learner's code are reported, never re-raised.
"""

from __future__ import annotations

import ctypes
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

__all__ = ["DEFAULT_TIME_LIMIT", "Outcome", "TimeLimitExceeded", "call_with_time_limit"]

# Every reference solution finishes all its cases in well under 0.1 s on a slow shared
# machine; 10 s of the learner's own time per check leaves room for slow but honest loops.
DEFAULT_TIME_LIMIT = 10.0
_STOP_ATTEMPTS, _STOP_WAIT = 10, 0.05  # up to 0.5 s for a runaway thread to notice the stop


class TimeLimitExceeded(BaseException):
    """Raised inside a learner's function that ran out of time (not an Exception subclass,
    so a learner's ``except Exception:`` cannot swallow it)."""


@dataclass
class Outcome:
    """What one call did: ``kind`` is 'ok', 'todo', 'raised', 'exit' or 'timeout'."""

    kind: str
    value: Any = None
    seconds: float = 0.0
    still_running: bool = False


def _ask_to_stop(thread: threading.Thread, box: dict) -> bool:
    """Raise TimeLimitExceeded in ``thread`` until it ends; False if it is stuck in C code.

    Raised again while the function has not finished, in case a bare ``except:`` swallowed it.
    """
    for _ in range(_STOP_ATTEMPTS):
        if not thread.is_alive():
            return True
        if "kind" not in box and thread.ident is not None:  # None: not yet running
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(thread.ident), ctypes.py_object(TimeLimitExceeded)
            )
        thread.join(_STOP_WAIT)
    return not thread.is_alive()


def call_with_time_limit(fn: Callable, args: tuple, limit: float) -> Outcome:
    """Call ``fn(*args)`` in a worker thread; give up after ``limit`` seconds.

    Never raises, except for a real ``KeyboardInterrupt`` while waiting (the
    notebook's stop button), which stops the worker and propagates.

    Examples
    --------
    >>> call_with_time_limit(lambda x: x + 1, (1,), 1.0).value
    2
    >>> def forever():
    ...     while True:
    ...         pass
    >>> out = call_with_time_limit(forever, (), 0.05)
    >>> out.kind, out.still_running
    ('timeout', False)
    """
    box: dict = {}

    def work() -> None:
        try:
            try:
                with np.errstate(all="ignore"):  # numpy's error state is per thread
                    value = fn(*args)
                box["value"], box["kind"] = value, "ok"
            except NotImplementedError:
                box["kind"] = "todo"
            except TimeLimitExceeded:
                box["kind"] = "timeout"
            except SystemExit as exc:
                box["value"], box["kind"] = exc, "exit"
            except BaseException as exc:  # noqa: BLE001 - the learner's code may raise anything
                box["value"], box["kind"] = exc, "raised"
        except TimeLimitExceeded:  # a stop that arrived just as the function finished
            box.setdefault("kind", "timeout")

    worker = threading.Thread(target=work, name="exercise-check", daemon=True)
    start = time.perf_counter()
    try:
        # start() waits for the worker to begin, which may already be running the
        # learner's code: an interrupt can arrive there too, so it is inside the try.
        worker.start()
        worker.join(max(limit, 0.0))
    except KeyboardInterrupt:
        _ask_to_stop(worker, box)
        raise
    seconds = time.perf_counter() - start
    if worker.is_alive():
        stopped = _ask_to_stop(worker, box)
        return Outcome("timeout", None, seconds, still_running=not stopped)
    return Outcome(box.get("kind", "timeout"), box.get("value"), seconds)
