"""`make linkcheck` with or without a network: a Sphinx extension and a small report script.

As a Sphinx extension: when the environment variable
``ATTENTION_COURSE_LINKCHECK_OFFLINE`` is ``1``, the linkcheck builder ignores
every ``http://`` and ``https://`` link (``linkcheck_ignore``), so an offline
run checks only what needs no network: cross-references and anchors inside the
book (a broken one is a build warning, and ``-W`` makes it fail) and links to
local files. With the variable unset or ``0`` nothing changes and external
links are checked too. ``make linkcheck`` probes the network and sets it.

As a script:

* ``python book/_ext/linkcheck_offline.py --probe doi.org arxiv.org`` prints ``0``
  when every host accepts a connection on port 443 within 3 seconds, else ``1``
  (the value for the variable). Probe the hosts the book links to: a machine may
  reach a package index and nothing else.
* ``python book/_ext/linkcheck_offline.py _build/linkcheck/output.json`` prints a
  summary of the results and lists the external links that were not checked, so
  an offline pass is never mistaken for a full one; exit status 1 if any link
  is broken.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections import Counter
from pathlib import Path

ENV_VAR = "ATTENTION_COURSE_LINKCHECK_OFFLINE"
EXTERNAL = r"^https?://"


def offline(environ=os.environ) -> bool:
    """True when ``ATTENTION_COURSE_LINKCHECK_OFFLINE`` says there is no network."""
    return environ.get(ENV_VAR, "").strip().lower() in {"1", "true", "yes", "on"}


def _on_config_inited(app, config) -> None:
    if offline():
        config.linkcheck_ignore = [*config.linkcheck_ignore, EXTERNAL]


def setup(app):
    app.connect("config-inited", _on_config_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def report(output_json: Path) -> str:
    """A summary of Sphinx's linkcheck ``output.json`` (one JSON object per line)."""
    results = [json.loads(line) for line in output_json.read_text(encoding="utf-8").splitlines() if line.strip()]
    counts = Counter(r["status"] for r in results)
    lines = ["linkcheck: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))]
    skipped = sorted({(r["uri"], r["filename"], r["lineno"]) for r in results
                      if r["status"] == "ignored" and r["uri"].startswith(("http://", "https://"))})  # fmt: skip
    if skipped:
        lines.append(f"{len({uri for uri, _, _ in skipped})} external links were NOT checked (no network):")
        lines += [f"  {uri}  ({filename}:{lineno})" for uri, filename, lineno in skipped]
    broken = [r for r in results if r["status"] in {"broken", "timeout"}]
    lines += [f"  BROKEN {r['uri']}  ({r['filename']}:{r['lineno']}) {r['info']}" for r in broken]
    lines.append(f"details: {output_json.with_name('output.txt')} and {output_json.name}")
    return "\n".join(lines)


def reachable(hosts: list[str], timeout: float = 3.0) -> bool:
    """True when every host accepts a TCP connection on port 443 within ``timeout`` seconds."""
    try:
        for host in hosts:
            socket.create_connection((host, 443), timeout=timeout).close()
    except OSError:
        return False
    return True


def _broken(output_json: Path) -> bool:
    return any(json.loads(line)["status"] in {"broken", "timeout"}
               for line in output_json.read_text(encoding="utf-8").splitlines() if line.strip())  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:2] == ["--probe"]:
        print(0 if reachable(sys.argv[2:]) else 1)
        sys.exit(0)
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "_build/linkcheck/output.json")
    if not path.is_file():
        sys.exit(f"{path} is missing: the linkcheck build did not get to check links")
    print(report(path))
    sys.exit(1 if _broken(path) else 0)
