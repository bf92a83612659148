r"""Time, memory, throughput and accuracy of exact and efficient attention as n grows.

``python -m attention_course bench`` (:data:`BENCH`) records, per method and length ``n`` (``d = 64``,
float32, batch = heads = 1): the median time over interleaved rounds; the rise of peak RSS in a fresh
subprocess (``memory="analytic"``: the largest intermediate's bytes); GFLOP/s against a square float32
matmul timed in the same rounds (giving load-normalised slopes); and the relative error on ``iid``,
``iid-soft`` (q, k halved) and ``smooth`` inputs. The summary is computed by pure functions of the table.
"""

from __future__ import annotations

import gc
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F

from ...core import approximations as approx
from ...core import efficient as eff
from ...core.attention import scaled_dot_product_attention
from .approximation_error import DISTRIBUTIONS, benchmark_inputs
from .baselines import loglog_slope
from ...models.experiments import Experiment, read_json, register
from ...models.records import DATA_DIR, machine_info

__all__ = ["summarise", "crossover_n", "load_benchmarks"]

SCHEMA_VERSION = 1
FULL_NS = (256, 512, 1024, 2048, 4096, 8192, 16384)
QUICK_NS = (256, 512, 1024, 2048)
DEFAULT_JSON = DATA_DIR / "benchmarks_full.json"  # shipped with the package
BLOCK = 1024  # the chunked method's key and query block


class Method(NamedTuple):
    """One benchmarked configuration: ``fn(q, k, v) -> output``."""

    name: str
    family: str  # exact | linear | performer | nystrom | linformer | linformer-pool
    param: Optional[int]  # features / landmarks / projected length
    exact: bool
    fn: Callable


def method_configs(quick: bool = False) -> list[Method]:
    """The methods compared, from naive exact attention to the approximations."""
    perf, nys, lin = ((64, 256), (32, 128), (64, 256)) if quick else ((64, 256, 1024), (32, 128, 512), (64, 256, 1024))
    methods = [
        Method("naive", "exact", None, True, lambda q, k, v: scaled_dot_product_attention(q, k, v)[0]),
        Method("sdpa", "exact", None, True, lambda q, k, v: F.scaled_dot_product_attention(q, k, v)),
        Method("chunked", "exact", None, True,
               lambda q, k, v: eff.chunked_attention(q, k, v, block_size=BLOCK, query_block_size=BLOCK)),
        Method("linear", "linear", None, False, lambda q, k, v: eff.linear_attention(q, k, v)),
    ]
    methods += [Method(f"performer-{m}", "performer", m, False,
                       lambda q, k, v, m=m: approx.performer_attention(q, k, v, num_features=m, seed=0)) for m in perf]
    methods += [Method(f"nystrom-{m}", "nystrom", m, False,
                       lambda q, k, v, m=m: approx.nystrom_attention(q, k, v, num_landmarks=m)) for m in nys]
    methods += [Method(f"linformer-{m}", "linformer", m, False,
                       lambda q, k, v, m=m: approx.linformer_attention(q, k, v, proj_dim=m, seed=0)) for m in lin]
    methods += [Method(f"linformer-pool-{m}", "linformer-pool", m, False,
                       lambda q, k, v, m=m: approx.linformer_attention(q, k, v, proj_dim=m, projection="mean"))
                for m in lin]
    return methods


# ------------------------------------------------------------- measurements
def _time_interleaved(fns: dict, repeats: int, budget_s: float, min_sample_s: float = 0.02) -> dict[str, list[float]]:
    """Warm each function up once, then time ``repeats`` rounds that call every function in turn.

    A function faster than ``min_sample_s`` is called several times per sample; one slower than
    ``budget_s`` gets fewer rounds.
    """
    first, inner = {}, {}
    for name, fn in fns.items():
        t0 = time.perf_counter()
        fn()
        first[name] = time.perf_counter() - t0
        inner[name] = max(1, min(100, math.ceil(min_sample_s / max(first[name], 1e-6))))
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(repeats):
        for name, fn in fns.items():
            if r > 0 and first[name] * r > budget_s:  # very slow methods: fewer repeats
                continue
            t0 = time.perf_counter()
            for _ in range(inner[name]):
                fn()
            times[name].append((time.perf_counter() - t0) / inner[name])
    return times


MATMUL = "__matmul__"  # the reference matmul's key in the timing rounds
MEMORY_NOTES = {
    "rss": "rise of the peak resident set size (VmHWM, reset via /proc/self/clear_refs) during one call, "
           "in a fresh subprocess with MALLOC_MMAP_THRESHOLD_=65536; includes the output tensor",
    "analytic": "bytes of the largest intermediate tensor (not measured)",
}


def analytic_bytes(name: str, n: int, d: int, itemsize: int = 4) -> Optional[int]:
    """Bytes of the largest intermediate a method creates (None where unknown, e.g. SDPA's kernel)."""
    family, _, param = name.rpartition("-") if name[-1].isdigit() else (name, "", "")
    m = int(param) if param else 0
    sizes = {
        "naive": n * n, "chunked": min(n, BLOCK) * min(n, BLOCK), "linear": n * d,
        "performer": n * m, "nystrom": max(n * m, m * m), "linformer": max(n * m, m * n),
        "linformer-pool": n * m,
    }
    return None if family not in sizes else sizes[family] * itemsize


def _rss_probe_available() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _vm(field: str) -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith(field + ":"))


def _memory_worker(names: Sequence[str], ns: Sequence[int], d: int, threads: int) -> dict:
    """Runs inside the subprocess: peak RSS rise of one call per (method, n)."""
    torch.set_num_threads(threads)
    fns = {m.name: m.fn for m in method_configs(quick=False) + method_configs(quick=True)}
    out: dict = {}
    q, k, v = benchmark_inputs(min(ns), d)
    with torch.inference_mode():
        for name in names:  # warm-up: one-time allocations (thread pools, caches) are not the method's
            if _valid(name, min(ns)):
                fns[name](q, k, v)
    for n in ns:
        q, k, v = benchmark_inputs(n, d)
        for name in names:
            if not _valid(name, n):
                continue
            gc.collect()
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")  # reset the peak-RSS mark to the current RSS
            base = _vm("VmRSS")
            with torch.inference_mode():
                res = fns[name](q, k, v)
            out[f"{name}@{n}"] = _vm("VmHWM") - base
            del res
    return out


def _measure_memory(names, ns, d, threads) -> dict:
    code = ("import json, sys; from attention_course.chapters.lowrank.benchmarks import _memory_worker as w; "
            "print(json.dumps(w(*json.loads(sys.argv[1]))))")
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": str(threads)}
    proc = subprocess.run([sys.executable, "-c", code, json.dumps([list(names), list(ns), d, threads])],
                          capture_output=True, text=True, env=env, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _valid(name: str, n: int) -> bool:
    """Landmarks and projected lengths must not exceed n."""
    param = name.rpartition("-")[2]
    return not (param.isdigit() and not name.startswith("performer") and int(param) > n)


def _rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref.double()).norm() / ref.double().norm())


def run_benchmarks(
    ns: Optional[Sequence[int]] = None, d: int = 64, quick: bool = False, max_n: Optional[int] = None,
    repeats: Optional[int] = None, memory: Optional[str] = None, threads: Optional[int] = 1,
    budget_s: float = 30.0, matmul_n: Optional[int] = None,
) -> dict:
    """Measure every method at every length; returns the JSON-ready result dict.

    Parameters
    ----------
    ns : lengths; default 256..16384 (quick: 256..2048), cut at ``max_n``.
    quick : fewer methods, lengths and repeats, analytic memory (a few seconds).
    memory : ``"rss"`` (subprocess, Linux) or ``"analytic"``; default rss unless quick.
    threads : torch threads during the run (restored afterwards; one by default); ``None`` keeps torch's.
    budget_s : a method whose first call takes longer gets fewer repeats.
    matmul_n : size of the square reference matmul (default 2048; quick 512).
    """
    ns = list(ns or (QUICK_NS if quick else FULL_NS))
    ns = [n for n in ns if max_n is None or n <= max_n]
    repeats = repeats or 3
    memory = memory or ("analytic" if quick or not _rss_probe_available() else "rss")
    old_threads = torch.get_num_threads()
    threads = threads or old_threads
    torch.set_num_threads(threads)
    try:
        methods = method_configs(quick)
        n0 = matmul_n or (512 if quick else 2048)
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(n0, n0, generator=g), torch.randn(n0, n0, generator=g)
        rows, mm_by_n = [], {}
        for n in ns:
            valid = [m for m in methods if _valid(m.name, n)]
            q, k, v = benchmark_inputs(n, d)
            with torch.inference_mode():
                fns = {MATMUL: lambda: a @ b, **{m.name: (lambda m=m: m.fn(q, k, v)) for m in valid}}
                times = _time_interleaved(fns, repeats, budget_s)
                t_mm = statistics.median(times[MATMUL])
                mm_by_n[str(n)] = {"seconds": t_mm, "gflops": 2 * n0**3 / t_mm / 1e9}
                errors = {m.name: {} for m in valid}
                for dist in DISTRIBUTIONS:
                    qd, kd, vd = benchmark_inputs(n, d, dist, seed=1)
                    ref = F.scaled_dot_product_attention(qd, kd, vd)
                    for m in valid:
                        errors[m.name][dist] = _rel_err(m.fn(qd, kd, vd), ref)
            for m in valid:
                t = statistics.median(times[m.name])
                flops = 4 * n * n * d if m.exact else None
                rows.append({
                    "method": m.name, "family": m.family, "param": m.param, "exact": m.exact, "n": n,
                    "time_s": t, "times_s": times[m.name], "error": errors[m.name],
                    "gflops": flops / t / 1e9 if flops else None,
                    "matmul_ratio": flops / t / 1e9 / mm_by_n[str(n)]["gflops"] if flops else None,
                    "time_norm": t / t_mm,
                    "analytic_bytes": analytic_bytes(m.name, n, d), "peak_bytes": None,
                })
        if memory == "rss":
            peaks = _measure_memory([m.name for m in methods], ns, d, threads)
            for row in rows:
                row["peak_bytes"] = peaks.get(f"{row['method']}@{row['n']}")
        else:
            for row in rows:
                row["peak_bytes"] = row["analytic_bytes"]
    finally:
        torch.set_num_threads(old_threads)
    result = {
        "schema_version": SCHEMA_VERSION,
        "machine": machine_info(threads),
        "config": {"d": d, "ns": ns, "dtype": "float32", "batch": 1, "heads": 1, "repeats": repeats,
                   "quick": quick, "memory_method": memory, "memory_note": MEMORY_NOTES[memory],
                   "error_reference": "torch SDPA in float32, on inputs drawn with seed 1", "chunk_block": BLOCK,
                   "distributions": list(DISTRIBUTIONS), "flops_per_exact_call": "4 n^2 d"},
        "matmul": {"n": n0, "gflops": statistics.median(v["gflops"] for v in mm_by_n.values()),
                   "by_n": mm_by_n},
        "results": rows,
    }
    result["summary"] = summarise(result)
    return result


# ------------------------------------------------------------- pure analysis
def _slope(ns: Sequence[float], times: Sequence[Optional[float]], n_min: float = 0) -> float:
    """Log-log slope of time against n over ``n >= n_min`` and the measured (positive) times.

    NaN when fewer than two such points remain.

    Examples
    --------
    >>> _slope([100, 200, 400], [1.0, 4.0, 16.0])
    2.0
    >>> _slope([100, 200], [1.0, None])
    nan
    """
    pts = [(n, t) for n, t in zip(ns, times) if n >= n_min and t and t > 0]
    if len(pts) < 2:
        return float("nan")
    return round(loglog_slope(*zip(*pts)), 12)


def crossover_n(ns: Sequence[int], t_method: Sequence[Optional[float]], t_exact: Sequence[float]) -> Optional[int]:
    """Smallest ``n`` from which on (at it and every larger ``n``) the method is faster.

    ``None`` times (method unusable at that ``n``) count as not faster.

    Examples
    --------
    >>> crossover_n([1, 2, 4, 8], [5.0, 3.0, 1.0, 2.0], [1.0, 2.0, 4.0, 8.0])
    4
    """
    faster = [tm is not None and tm < te for tm, te in zip(t_method, t_exact)]
    best = None
    for n, ok in sorted(zip(ns, faster), reverse=True):
        if not ok:
            break
        best = n
    return best


def _table(result: dict) -> dict:
    return {(r["method"], r["n"]): r for r in result["results"]}


def _crossovers(rows: list, ns: list, exact_t: list, dists: Sequence[str], target: float) -> dict:
    """Per distribution and family: the fastest configuration within ``target`` error at each n,
    and the smallest n from which on it beats ``exact_t``."""
    out: dict = {}
    for dist in dists:
        out[dist] = {}
        for fam in dict.fromkeys(r["family"] for r in rows if not r["exact"]):
            best_t, best_m = [], []
            for n in ns:
                ok = [r for r in rows if r["family"] == fam and r["n"] == n
                      and r["error"].get(dist, math.inf) <= target]
                pick = min(ok, key=lambda r: r["time_s"]) if ok else None
                best_t.append(pick["time_s"] if pick else None)
                best_m.append(pick["method"] if pick else None)
            cross = crossover_n(ns, best_t, exact_t)
            out[dist][fam] = {"n": cross, "method_at_n": best_m[ns.index(cross)] if cross else None}
    return out


def summarise(result: dict, error_target: float = 0.1, frontier_n: int = 4096, slope_n_min: int = 2048) -> dict:
    """Slopes, memory/time ratios, matmul ratios, crossovers at ``error_target`` and the frontier.

    Slopes are fitted over ``n >= slope_n_min`` (lowered to keep three lengths), on raw times and on
    times divided by the same round's reference matmul (``time_norm``).
    """
    rows, tab = result["results"], _table(result)
    ns = sorted({r["n"] for r in rows})
    names = list(dict.fromkeys(r["method"] for r in rows))
    n_top = ns[-1]
    frontier_n = frontier_n if frontier_n in ns else n_top
    slope_n_min = min(slope_n_min, ns[max(0, len(ns) - 3)])  # at least three points in the fit

    def series(name, key="time_s"):
        return [tab[(name, n)].get(key) if (name, n) in tab else None for n in ns]

    def ratio(a, b, key):
        ra, rb = tab.get((a, n_top)), tab.get((b, n_top))
        if not ra or not rb or not ra[key] or not rb[key]:
            return None
        return ra[key] / rb[key]

    exact = [name for name in names if any(r["exact"] for (m, _), r in tab.items() if m == name)]
    dists = result["config"]["distributions"]
    return {
        "top_n": n_top,
        "slope_n_min": slope_n_min,
        "slopes": {name: _slope(ns, series(name), slope_n_min) for name in names},
        "slopes_load_normalised": {name: _slope(ns, series(name, "time_norm"), slope_n_min) for name in names},
        "memory_ratio_chunked_vs_naive": ratio("chunked", "naive", "peak_bytes"),
        "time_ratio_chunked_vs_sdpa": ratio("chunked", "sdpa", "time_s"),
        "matmul_ratio": {name: {str(n): tab[(name, n)]["matmul_ratio"] for n in ns if n >= 2048 and (name, n) in tab}
                         for name in exact},
        "error_target": error_target,
        "crossover_vs_sdpa": _crossovers(rows, ns, series("sdpa"), dists, error_target) if "sdpa" in names else None,
        "crossover_vs_naive": _crossovers(rows, ns, series("naive"), dists, error_target) if "naive" in names else None,
        "frontier_n": frontier_n,
        "frontier": [{"method": r["method"], "family": r["family"], "param": r["param"], "time_s": r["time_s"],
                      "error": r["error"]} for r in rows if r["n"] == frontier_n],
    }


def format_table(result: dict) -> str:
    """A plain-text table: one row per (method, n)."""
    lines = [f"{'method':<20}{'n':>7}{'time ms':>11}{'peak MiB':>10}{'GFLOP/s':>9}{'of mm':>7}"
             + "".join(f"{'err ' + dist:>14}" for dist in result["config"]["distributions"])]
    for r in result["results"]:
        mem = f"{r['peak_bytes'] / 2**20:10.1f}" if r["peak_bytes"] is not None else f"{'-':>10}"
        gf = f"{r['gflops']:9.1f}{r['matmul_ratio']:7.2f}" if r["gflops"] else f"{'-':>9}{'-':>7}"
        errs = "".join(f"{r['error'][dist]:14.3g}" for dist in result["config"]["distributions"])
        lines.append(f"{r['method']:<20}{r['n']:>7}{1e3 * r['time_s']:11.2f}{mem}{gf}{errs}")
    s = result["summary"]
    lines.append(f"matmul {result['matmul']['n']}^3: {result['matmul']['gflops']:.1f} GFLOP/s (median over n); "
                 f"memory: {result['config']['memory_method']}")
    for key in ("slopes", "slopes_load_normalised"):
        lines.append(f"{key.replace('_', ' ')} (n >= {s['slope_n_min']}): "
                     + ", ".join(f"{k} {v:.2f}" for k, v in s[key].items() if v == v))
    lines.append(f"at n={s['top_n']}: chunked/naive peak memory {s['memory_ratio_chunked_vs_naive']}, "
                 f"chunked/sdpa time {s['time_ratio_chunked_vs_sdpa']}")
    return "\n".join(lines)


def load_benchmarks(path: Optional[os.PathLike] = None) -> dict:
    """Load a stored run (default: ``attention_course/data/benchmarks_full.json``, shipped with the package)."""
    path = Path(path) if path is not None else DEFAULT_JSON
    if not path.exists():
        raise FileNotFoundError(f"{path} not found; run `python -m attention_course bench --json {path}`")
    return read_json(path)


# ----------------------------------------------------------------------- the command
@dataclass(frozen=True)
class BenchConfig:
    """The arguments of :func:`run_benchmarks` the ``bench`` command takes."""

    quick: bool = False
    max_n: Optional[int] = None
    repeats: Optional[int] = None
    threads: Optional[int] = 1
    memory: Optional[str] = None


def _bench(config: BenchConfig) -> dict:
    return run_benchmarks(quick=config.quick, max_n=config.max_n, repeats=config.repeats, memory=config.memory,
                          threads=config.threads)


#: ``python -m attention_course bench``: prints a table, and writes JSON with ``--json``
#: (the shipped run: ``--json attention_course/data/benchmarks_full.json``).
BENCH = register(Experiment(
    "bench", BenchConfig(), _bench, None, document=lambda config, runs, meta: runs.records[0], report=format_table,
    out_flag="--json", also=(DEFAULT_JSON,), threads=None,
    flags={"--quick": dict(action="store_true", help="a small run (n <= 2048, analytic memory)"),
           "--max-n": dict(type=int, help="largest sequence length"),
           "--repeats": dict(type=int, help="timed rounds per length (3 when not given)"),
           "--threads": dict(type=int, help="torch threads"),
           "--memory": dict(choices=("rss", "analytic"), help="how the peak memory is measured")},
    help="time efficient attention against exact attention (chapter 3)",
    description="Measure error, time and peak memory of each efficient-attention method against exact attention as "
                "the sequence grows; print a table and, with --json, write JSON (--quick: a few seconds; the full "
                "run to n = 16384: minutes)."))
