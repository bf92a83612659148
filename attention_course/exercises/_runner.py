"""Run a learner's function with a time limit, so a loop that never ends cannot hang a notebook.

Why a worker thread, and what happens to a runaway one
------------------------------------------------------
The learner's function runs in a daemon thread and the checker waits for it with
``Thread.join(timeout)``. A signal timer (``signal.setitimer``) was the other
option, but it only works on the main thread and cannot interrupt a long C call
(``np.einsum`` over a huge index space, a BLAS product): the notebook would hang
until the call returns. A thread lets the checker give its verdict on time
whatever the function is doing, because numpy and torch release the GIL in their
long loops.

When the time is up the checker asks the thread to stop by raising
:class:`TimeLimitExceeded` inside it (``PyThreadState_SetAsyncExc``). Python
code (a ``while True`` loop, a slow Python loop) stops at its next bytecode, so
nothing is left running. A thread stuck inside one long C call cannot be stopped
from outside: it is a daemon thread, so it never blocks the kernel from exiting,
and the verdict says it may still be running and that restarting the kernel ends it.

``KeyboardInterrupt`` (the notebook's stop button) reaches the main thread while it
waits; the checker then stops the worker the same way and lets the interrupt
propagate, so the cell stops as any interrupted cell does. ``SystemExit`` and
``KeyboardInterrupt`` raised *by the learner's code* happen in the worker and are
reported as what they are, never re-raised.
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

    It is raised again only while the function has not finished (``box`` has no
    ``kind``), in case the learner's code swallowed it with a bare ``except:``.
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
