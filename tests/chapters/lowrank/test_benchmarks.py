"""Tests for attention_course.chapters.lowrank.benchmarks: the JSON schema of a tiny quick run, and the pure
analysis functions on fabricated timing tables. No test asserts an absolute time."""

from __future__ import annotations

import json
import math

import pytest
import torch

from attention_course.chapters.lowrank import benchmarks as bm
from attention_course.chapters.lowrank.approximation_error import DISTRIBUTIONS


@pytest.fixture(scope="module")
def tiny():
    return bm.run_benchmarks(ns=[16, 64], d=8, quick=True, repeats=1, matmul_n=64)


ROW_KEYS = {"method", "family", "param", "exact", "n", "time_s", "times_s", "error", "gflops",
            "matmul_ratio", "time_norm", "analytic_bytes", "peak_bytes"}


def test_quick_run_schema(tiny):
    assert tiny["schema_version"] == bm.SCHEMA_VERSION
    assert {"cpu", "cores", "torch_threads", "torch", "numpy", "python", "date"} <= set(tiny["machine"])
    assert tiny["config"]["memory_method"] == "analytic" and tiny["config"]["ns"] == [16, 64]
    assert set(tiny["matmul"]) == {"n", "gflops", "by_n"} and tiny["matmul"]["n"] == 64
    assert set(tiny["matmul"]["by_n"]) == {"16", "64"}  # timed alongside the methods at each n
    names = {m.name for m in bm.method_configs(quick=True)}
    for row in tiny["results"]:
        assert set(row) == ROW_KEYS
        assert set(row["error"]) == set(DISTRIBUTIONS)
        assert row["time_s"] > 0 and len(row["times_s"]) >= 1
        t_mm = tiny["matmul"]["by_n"][str(row["n"])]["seconds"]
        assert row["time_norm"] == pytest.approx(row["time_s"] / t_mm)
        assert (row["gflops"] is not None) == row["exact"]
        assert row["peak_bytes"] == row["analytic_bytes"]  # analytic mode says so in the config
    # nystrom-32 and -128 need n >= landmarks: absent at n = 16, nystrom-32 present at 64
    at = {(r["method"], r["n"]) for r in tiny["results"]}
    assert ("nystrom-32", 16) not in at and ("nystrom-32", 64) in at and ("nystrom-128", 64) not in at
    assert {r["method"] for r in tiny["results"] if r["n"] == 64} == names - {"nystrom-128", "linformer-256", "linformer-pool-256"}
    json.loads(json.dumps(tiny))  # serialisable
    assert {"slopes", "slopes_load_normalised", "memory_ratio_chunked_vs_naive", "time_ratio_chunked_vs_sdpa",
            "matmul_ratio", "crossover_vs_sdpa", "crossover_vs_naive", "frontier", "frontier_n"} <= set(tiny["summary"])


def test_exact_methods_agree_and_threads_are_restored(tiny):
    before = torch.get_num_threads()
    bm.run_benchmarks(ns=[16], d=8, quick=True, repeats=1, matmul_n=32, threads=1)
    assert torch.get_num_threads() == before
    for row in tiny["results"]:
        if row["exact"]:
            assert max(row["error"].values()) < 1e-5  # float32 vs torch's SDPA
    pool = {r["n"]: r for r in tiny["results"] if r["method"] == "linformer-pool-64"}
    assert max(pool[64]["error"].values()) < 1e-5  # 64 segments of one token: exact


def test_cli_writes_json_and_prints_a_table(tmp_path, capsys):
    out = tmp_path / "b.json"
    from attention_course.__main__ import main

    assert main(["bench", "--quick", "--max-n", "256", "--repeats", "1", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["config"]["ns"] == [256]
    printed = capsys.readouterr().out
    assert "chunked" in printed and "slopes load normalised" in printed


# ------------------------------------------------------------- pure functions
def test_loglog_slope_recovers_powers():
    ns = [256, 512, 1024, 2048, 4096]
    assert bm._slope(ns, [3e-9 * n**2 for n in ns]) == pytest.approx(2.0, abs=1e-9)
    assert bm._slope(ns, [5e-7 * n for n in ns]) == pytest.approx(1.0, abs=1e-9)
    # only n >= 1024 enters the fit: an overhead-dominated start is ignored
    assert bm._slope(ns, [1.0, 1.0, 1e-6 * 1024**2, 1e-6 * 2048**2, 1e-6 * 4096**2], n_min=1024) == pytest.approx(2.0)
    assert math.isnan(bm._slope([1024], [1.0]))


def test_crossover_n_cases():
    ns = [256, 512, 1024, 2048]
    exact = [1.0, 2.0, 4.0, 8.0]
    assert bm.crossover_n(ns, [2.0, 1.0, 1.0, 1.0], exact) == 512
    assert bm.crossover_n(ns, [0.5, 3.0, 1.0, 1.0], exact) == 1024  # faster at 256, not at 512
    assert bm.crossover_n(ns, [2.0, 3.0, 5.0, 9.0], exact) is None
    assert bm.crossover_n(ns, [None, 1.0, 1.0, None], exact) is None  # unusable at the largest n
    assert bm.crossover_n(ns, [0.1, 0.1, 0.1, 0.1], exact) == 256


LOAD = {1024: 1.0, 2048: 2.0, 4096: 1.0, 8192: 3.0}  # a shared machine: everything slower at times


def _row(method, family, param, exact, n, t, err, peak=None):
    t_mm = 0.1 * LOAD[n]  # the reference matmul, timed in the same rounds, slows down alike
    return {"method": method, "family": family, "param": param, "exact": exact, "n": n, "time_s": LOAD[n] * t,
            "times_s": [LOAD[n] * t], "error": {"iid": err, "smooth": err / 10}, "gflops": None,
            "matmul_ratio": 0.5 if exact else None, "time_norm": LOAD[n] * t / t_mm,
            "analytic_bytes": None, "peak_bytes": peak}


def fabricated():
    ns = [1024, 2048, 4096, 8192]
    rows = []
    for n in ns:
        rows += [
            _row("naive", "exact", None, True, n, 4e-9 * n**2, 0.0, peak=4 * n * n),
            _row("sdpa", "exact", None, True, n, 2e-9 * n**2, 0.0, peak=8 * n),
            _row("chunked", "exact", None, True, n, 3e-9 * n**2, 0.0, peak=n * 1024),
            _row("linear", "linear", None, False, n, 1e-6 * n, 0.8),
            # error 0.05 <= 0.1: counts; cost 2e-5 n crosses 2e-9 n^2 at n = 1e4 -> never within 8192
            _row("perf-a", "performer", 64, False, n, 2e-5 * n, 0.05),
            # error 0.2 in iid (0.02 in smooth): cheap, but only usable for the smooth inputs
            _row("perf-b", "performer", 16, False, n, 1e-7 * n, 0.2),
            # nystrom: 1e-5 n < 2e-9 n^2 exactly when n > 5000
            _row("nys-a", "nystrom", 32, False, n, 1e-5 * n, 0.09),
        ]
    return {"config": {"distributions": ["iid", "smooth"]}, "results": rows}


def test_summarise_on_a_fabricated_table():
    s = bm.summarise(fabricated(), error_target=0.1, frontier_n=4096, slope_n_min=1024)
    norm = s["slopes_load_normalised"]
    assert norm["naive"] == pytest.approx(2.0) and norm["linear"] == pytest.approx(1.0)
    assert s["slopes"]["naive"] != pytest.approx(2.0, abs=0.05)  # the drift distorts the raw slope
    assert s["slopes"]["naive"] - s["slopes"]["linear"] == pytest.approx(1.0)  # ... equally for all
    assert s["top_n"] == 8192
    assert s["memory_ratio_chunked_vs_naive"] == pytest.approx(1024 / (4 * 8192))
    assert s["time_ratio_chunked_vs_sdpa"] == pytest.approx(1.5)
    assert s["matmul_ratio"]["naive"] == {"2048": 0.5, "4096": 0.5, "8192": 0.5}
    iid, smooth = s["crossover_vs_sdpa"]["iid"], s["crossover_vs_sdpa"]["smooth"]
    assert iid["nystrom"] == {"n": 8192, "method_at_n": "nys-a"}
    assert iid["performer"] == {"n": None, "method_at_n": None}  # perf-a never faster, perf-b too inaccurate
    assert iid["linear"]["n"] is None  # never accurate enough
    naive = s["crossover_vs_naive"]["iid"]  # naive: 4e-9 n^2; nys-a wins above n = 2500, perf-a above 5000
    assert naive["nystrom"]["n"] == 4096 and naive["performer"]["n"] == 8192
    assert smooth["performer"] == {"n": 1024, "method_at_n": "perf-b"}  # 0.02 error: the cheap one counts
    assert {p["method"] for p in s["frontier"]} == {"naive", "sdpa", "chunked", "linear", "perf-a", "perf-b", "nys-a"}
    assert all(p["time_s"] == pytest.approx(LOAD[4096] * 4e-9 * 4096**2) for p in s["frontier"] if p["method"] == "naive")


def test_analytic_bytes():
    assert bm.analytic_bytes("naive", 4096, 64) == 4 * 4096**2
    assert bm.analytic_bytes("chunked", 4096, 64) == 4 * bm.BLOCK**2
    assert bm.analytic_bytes("performer-256", 4096, 64) == 4 * 4096 * 256
    assert bm.analytic_bytes("linformer-pool-64", 4096, 64) == 4 * 4096 * 64
    assert bm.analytic_bytes("sdpa", 4096, 64) is None


@pytest.mark.skipif(not bm._rss_probe_available(), reason="needs Linux /proc/self/clear_refs")
def test_rss_probe_sees_the_naive_score_matrix():
    """naive at n = 1024 holds several 1024 x 1024 float32 matrices (4 MiB each) at once."""
    peaks = bm._measure_memory(["naive", "linear"], [1024], 64, 1)
    assert 4 * 2**20 <= peaks["naive@1024"] < 64 * 2**20
    assert peaks["linear@1024"] < peaks["naive@1024"] / 4


def test_table_lists_every_row(tiny):
    text = bm.format_table(tiny)
    assert all(r["method"] in text for r in tiny["results"])
