"""Shared test settings: a headless matplotlib backend in the test process, offline Hugging Face,
and the `numerics` marker.

The backend is set in-process only (not through MPLBACKEND), because notebook
kernels started by nbval inherit the environment and must keep the inline backend.
"""

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import matplotlib  # noqa: E402

matplotlib.use("Agg")


import matplotlib.pyplot as plt  # noqa: E402
from page_spec import page_spec  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402

# Test modules whose results are floating-point values checked against a tolerance, another
# implementation or a threshold, or come from a random or trained experiment: they can change
# with the CPU's vector kernels and the thread count. They, every notebook cell (nbval) and the
# tests marked in their own file (test_pretrained.py) are marked `numerics`, and
# `make test-portable` re-runs them with portable torch and OpenBLAS kernels and one thread.
# Not listed: figure smoke tests, timing and memory probes, structure and packaging tests.
NUMERICS_MODULES = frozenset({
    "test_approximation_error", "test_approximations", "test_attention", "test_attention_kernel",
    "test_bottleneck", "test_claims", "test_collapse", "test_efficient", "test_exercise_battery",
    "test_exercises", "test_hull", "test_gnn", "test_propagation", "test_subspaces",
    "test_kernel_learning", "test_smoothing", "test_spectra", "test_properties", "test_models",
    "test_multihead", "test_roles", "test_rollout", "test_scale_training", "test_scaling",
    "test_composition", "test_qk_kernel", "test_queries_keys", "test_init_vs_step", "test_backward_swap", "test_saturation_training", "test_topology_rule", "test_depth_probe",
    "test_position_content", "test_graph_overlap_exercise", "test_hop_sweep",
})
TESTS = Path(__file__).resolve().parent

# The second tier (`make test-extended`, which CI runs after `make test`) also takes, so that
# `make test` stays the few-minute gate every contributor runs:
# * the evidence pages under nbval: they re-read the shipped long runs and redraw every figure
#   that decides a verdict (about half of the notebooks' time); the lessons stay in `make test`;
# * the check batteries of the exercises that load a pretrained model or train one inside the
#   check (each case costs seconds; together they were a fifth of `make test`).
EXTENDED_NOTEBOOKS = re.compile(r"_evidence\.ipynb$")
EXTENDED_EXERCISES = re.compile(r"\[(decoder-forward|bert-encoder)[\]:]")
EXERCISE_BATTERIES = frozenset({"test_exercises", "test_rules", "test_exercise_battery", "test_exercises_gpt",
                                "test_exercises_encoder"})


def pytest_collection_modifyitems(config, items):
    """Mark the notebooks' cells `notebook` and `numerics`, the tests of NUMERICS_MODULES `numerics`,
    and the second tier's items (EXTENDED_NOTEBOOKS, EXTENDED_EXERCISES) `extended`.

    When `numerics` is selected (make test-portable), a listed module that no longer
    exists is an error, so a renamed test file cannot silently drop out of the run.
    """
    present = {p.stem for p in TESTS.rglob("test_*.py")}
    missing = sorted(NUMERICS_MODULES - present)
    if missing and "numerics" in (config.getoption("markexpr") or ""):
        raise pytest.UsageError(f"tests/conftest.py: NUMERICS_MODULES names missing files {missing}")
    for item in items:
        path = Path(item.path)
        if path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebook)
            if EXTENDED_NOTEBOOKS.search(path.name):
                item.add_marker(pytest.mark.extended)
        if path.suffix == ".ipynb" or (TESTS in path.parents and path.stem in NUMERICS_MODULES):
            item.add_marker(pytest.mark.numerics)
        if path.stem in EXERCISE_BATTERIES and EXTENDED_EXERCISES.search(item.name):
            item.add_marker(pytest.mark.extended)


@pytest.fixture(autouse=True)
def _figures_closed_and_rcparams_unchanged():
    """Close every figure after each test, and fail if a test changed global rcParams."""
    before = dict(matplotlib.rcParams)
    yield
    plt.close("all")
    assert dict(matplotlib.rcParams) == before, "a plot helper changed global rcParams"


@pytest.fixture(scope="module")
def one_torch_thread():
    """Run a module's tests on one torch thread: tiny problems, faster on a shared 2-core machine.

    Opt in with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``.
    """
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def check_flagged_html():
    """``check(fig, verdict, note=None, max_bytes=None, every_frame=False)`` for a flagged slider's HTML:
    the same page twice, a link to its verdict box, a flag note at ``fig.flip`` (returned, with the
    page), and optionally a text the page must contain, a size it must stay under and (``every_frame``)
    a flag note that names its frame's label and a readout in every frame."""
    def check(fig, verdict: str, note: str | None = None, max_bytes: int | None = None,
              every_frame: bool = False) -> tuple[str, str]:
        html = fig.to_html()
        assert html == fig.to_html(), f"{fig.name}: the HTML differs between two calls"
        assert f'data-verdict="{verdict}"' in html and f'href="#claim-{verdict}"' in html, f"{fig.name}: no link to {verdict}"
        flag = re.search(rf'data-flip="{fig.flip}" data-verdict="{verdict}">(.*?)<a', html)
        assert flag, f"{fig.name}: no flag note at frame {fig.flip}"
        assert note is None or note in html, f"{fig.name}: {note!r} missing"
        assert max_bytes is None or len(html.encode()) < max_bytes, f"{fig.name}: {len(html.encode())} bytes"
        if every_frame:  # the flag names the value it sits at and says what changes; every frame reads out
            assert fig.labels[fig.flip] in flag.group(1) and len(flag.group(1)) > 40, f"{fig.name}: {flag.group(1)!r}"
            frames = page_spec(fig, html)["frames"]
            assert len(frames) == len(fig.labels) and all(fr["readout"] for fr in frames), f"{fig.name}: a frame without a readout"
        return html, flag.group(1)
    return check


def pytest_collection_finish(session):
    """Set the objects alive after collection (torch, the test modules, their parameters) aside from
    the garbage collector: its full collections during the run then walk only what tests create.
    Only the collector's work changes; every object a test makes is collected as before.
    Hypothesis is imported first: its plugins (trio's) check a PRNG's referrers with gc, which
    cannot see frozen objects, and would warn that the PRNG has none."""
    import gc

    import hypothesis  # noqa: F401

    gc.freeze()
