"""Print the package index URL given if it answers within 3 seconds, else print nothing.

``make venv`` adds PyTorch's CPU wheel index (``TORCH_INDEX`` in the Makefile) to pip
only when this prints it. pip retries an index it cannot reach five times, with back-off
and a long time-out each, before it moves on; this answers in at most 3 seconds, DNS
included, so a machine that is offline, behind a firewall or on its own package mirror
installs from its default index straight away::

    python .ci/reachable.py https://download.pytorch.org/whl/cpu   # prints the URL, or nothing

Any HTTP answer counts, an error status included (the server is there; pip then finds
nothing on it and uses its other indexes). An empty argument prints nothing.
"""

from __future__ import annotations

import sys
import threading
import urllib.error
import urllib.request

TIMEOUT = 3.0  # seconds, for the whole probe: name lookup, connection and answer


def _answers(url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True  # a status code is an answer
    except (OSError, ValueError):  # no route, refused, time-out, TLS failure, not a URL
        return False


def reachable(url: str, timeout: float = TIMEOUT) -> bool:
    """True when ``url`` answers an HTTP HEAD request within ``timeout`` seconds in all.

    ``urlopen``'s own time-out does not cover the name lookup, so the request runs in
    a daemon thread that is abandoned when the time is up.
    """
    if not url.strip():
        return False
    answer: list[bool] = []
    thread = threading.Thread(target=lambda: answer.append(_answers(url, timeout)), daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(answer and answer[0])


if __name__ == "__main__":
    url = " ".join(sys.argv[1:]).strip()
    if reachable(url):
        print(url)
