"""Blind battery for exercise `window-sweep` (my_smallest_window(run, windows, margin)).

The correct answers compare exactly as the stub's docstring writes it: run(w) >= run(None) - margin.
They call run(None) once, and call run(w) at most once per window.
"""
import numpy as np


# --------------------------------------------------------------------------- correct answers
def correct_1(run, windows, margin):
    """Style: sort the windows, return the first that passes (early exit), else 0."""
    target = run(None) - margin
    for w in sorted(windows):
        if run(w) >= target:
            return w
    return 0


def correct_2(run, windows, margin):
    """Style: run every window, then min() over the passing ones with default=0."""
    full = run(None)
    return min((w for w in windows if run(w) >= full - margin), default=0)


def correct_3(run, windows, margin):
    """Style: dict of accuracies, filtered list comprehension, explicit empty check."""
    full = run(None)
    acc = {w: run(w) for w in windows}
    passing = [w for w, a in acc.items() if a >= full - margin]
    return min(passing) if passing else 0


def correct_4(run, windows, margin):
    """Style: numpy arrays of windows and accuracies, boolean mask, converted back to the window's own value."""
    ws = list(windows)
    if not ws:
        return 0
    full = run(None)
    accs = np.array([run(w) for w in ws], dtype=float)
    ok = np.flatnonzero(accs >= full - margin)
    if ok.size == 0:
        return 0
    return ws[min(ok, key=lambda i: ws[i])]


def correct_5(run, windows, margin):
    """Style: next() over a generator of the sorted windows with 0 as the default."""
    threshold = run(None) - margin
    return next((w for w in sorted(windows) if run(w) >= threshold), 0)


# --------------------------------------------------------------------------- wrong answers
def wrong_1(run, windows, margin):
    """Uses a strict > instead of >= ('at least'), missing a window exactly at the threshold."""
    full = run(None)
    return min((w for w in windows if run(w) > full - margin), default=0)


def wrong_2(run, windows, margin):
    """Returns the first passing window in the given order, without sorting, so unsorted windows give a non-smallest answer."""
    full = run(None)
    for w in windows:
        if run(w) >= full - margin:
            return w
    return 0


def wrong_3(run, windows, margin):
    """Returns the largest passing window instead of the smallest."""
    full = run(None)
    return max((w for w in windows if run(w) >= full - margin), default=0)


def wrong_4(run, windows, margin):
    """Returns None instead of 0 when no window passes."""
    full = run(None)
    for w in sorted(windows):
        if run(w) >= full - margin:
            return w
    return None


def wrong_5(run, windows, margin):
    """Returns the passing window's accuracy instead of the window."""
    full = run(None)
    for w in sorted(windows):
        acc = run(w)
        if acc >= full - margin:
            return acc
    return 0


def wrong_6(run, windows, margin):
    """Returns the index of the passing window in `windows` instead of the window itself."""
    full = run(None)
    ws = list(windows)
    for i in sorted(range(len(ws)), key=lambda i: ws[i]):
        if run(ws[i]) >= full - margin:
            return i
    return 0


def wrong_7(run, windows, margin):
    """Puts the margin on the wrong side: requires run(w) >= run(None) + margin."""
    full = run(None)
    return min((w for w in windows if run(w) >= full + margin), default=0)


def wrong_8(run, windows, margin):
    """Reads the margin as relative: run(w) >= run(None) * (1 - margin)."""
    full = run(None)
    return min((w for w in windows if run(w) >= full * (1 - margin)), default=0)


def wrong_9(run, windows, margin):
    """Uses the largest window's accuracy as 'full attention' instead of calling run(None)."""
    ws = sorted(windows)
    if not ws:
        return 0
    full = run(ws[-1])
    return min((w for w in ws if run(w) >= full - margin), default=0)


def wrong_10(run, windows, margin):
    """Never runs full attention: assumes its accuracy is 1.0."""
    return min((w for w in windows if run(w) >= 1.0 - margin), default=0)


def wrong_11(run, windows, margin):
    """Uses min() without a default, so it raises ValueError when no window passes instead of returning 0."""
    full = run(None)
    return min(w for w in windows if run(w) >= full - margin)


def wrong_12(run, windows, margin):
    """Skips the first window (loop starts at index 1), an off-by-one."""
    full = run(None)
    ws = sorted(windows)
    for i in range(1, len(ws)):
        if run(ws[i]) >= full - margin:
            return ws[i]
    return 0


def wrong_13(run, windows, margin):
    """Ignores `windows` and sweeps the example's range(1, 7)."""
    full = run(None)
    return min((w for w in range(1, 7) if run(w) >= full - margin), default=0)


def wrong_14(run, windows, margin):
    """Requires |run(w) - run(None)| <= margin, rejecting a window that beats full attention by more than the margin."""
    full = run(None)
    return min((w for w in windows if abs(run(w) - full) <= margin), default=0)


def wrong_15(run, windows, margin):
    """Calls run(None) again for every window (retraining full attention each time: more runs than the seven models)."""
    for w in sorted(windows):
        if run(w) >= run(None) - margin:
            return w
    return 0


def wrong_16(run, windows, margin):
    """Returns the last failing window (the one just below the answer), an off-by-one on the sorted list."""
    full = run(None)
    prev = 0
    for w in sorted(windows):
        if run(w) >= full - margin:
            return prev if prev else w
        prev = w
    return 0


def wrong_17(run, windows, margin):
    """Requires every larger window to pass too (smallest w from which all pass), instead of the smallest passing window."""
    full = run(None)
    ws = sorted(windows)
    ok = [run(w) >= full - margin for w in ws]
    best = 0
    for i in range(len(ws) - 1, -1, -1):
        if not ok[i]:
            break
        best = ws[i]
    return best


ANSWERS = [
    ("correct_1", correct_1, "correct", "sorted loop with early exit"),
    ("correct_2", correct_2, "correct", "min over generator with default=0"),
    ("correct_3", correct_3, "correct", "dict of accuracies + filtered list"),
    ("correct_4", correct_4, "correct", "numpy boolean mask over accuracies"),
    ("correct_5", correct_5, "correct", "next() over sorted generator with default 0"),
    ("wrong_1", wrong_1, "wrong", "strict > instead of >="),
    ("wrong_2", wrong_2, "wrong", "first passing in given order (unsorted windows)"),
    ("wrong_3", wrong_3, "wrong", "largest passing window"),
    ("wrong_4", wrong_4, "wrong", "None instead of 0 when none passes"),
    ("wrong_5", wrong_5, "wrong", "returns the accuracy, not the window"),
    ("wrong_6", wrong_6, "wrong", "returns the index, not the window"),
    ("wrong_7", wrong_7, "wrong", "margin added instead of subtracted"),
    ("wrong_8", wrong_8, "wrong", "relative margin full*(1-margin)"),
    ("wrong_9", wrong_9, "wrong", "largest window's accuracy used as full attention"),
    ("wrong_10", wrong_10, "wrong", "full attention assumed to be 1.0"),
    ("wrong_11", wrong_11, "wrong", "min() without default raises when none passes"),
    ("wrong_12", wrong_12, "wrong", "first window skipped (off-by-one)"),
    ("wrong_13", wrong_13, "wrong", "windows ignored, range(1, 7) hard-coded"),
    ("wrong_14", wrong_14, "wrong", "absolute difference: windows better than full attention rejected"),
    ("wrong_15", wrong_15, "wrong", "run(None) re-run for every window (extra trainings)"),
    ("wrong_16", wrong_16, "wrong", "returns the window before the answer (off-by-one)"),
    ("wrong_17", wrong_17, "wrong", "smallest w from which all larger windows pass"),
]
