"""``python -m attention_course <command>``: the course's command line.

Two commands are the course's own: ``progress`` (run your chapter notebooks and list every
exercise: passed, failed with its feedback, or not attempted; see
:mod:`attention_course.course.progress`) and ``evidence`` (check the claims ledger against the
chapters and rewrite ``attention_course/data/evidence.json`` from the numbers the chapters
glued; see :mod:`attention_course.course.verdicts`). Every other command is a long run: an
:class:`~attention_course.models.experiments.Experiment` that a chapter registered in
:data:`~attention_course.models.experiments.EXPERIMENTS` (importing the package imports every
chapter), a configuration of the one runner that stores its JSON in ``attention_course/data/``.
``python -m attention_course <command> --help`` says what each computes and how long it takes.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NamedTuple, Optional, Sequence

from . import chapters  # noqa: F401  (importing every chapter registers its experiments)
from .models.experiments import EXPERIMENTS


class Command(NamedTuple):
    """A command that is not a long run: ``module`` (relative to this package, optionally
    ``":NAME"`` of an object in it) provides ``add_arguments(parser)`` and ``cli(args, parser) -> exit code``."""

    module: str
    help: str
    description: str


#: The commands that are not experiments.
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
}


def commands() -> dict:
    """Every command: the course's own (:data:`COMMANDS`), then the registered experiments."""
    return {**COMMANDS, **EXPERIMENTS}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser, one subparser per command."""
    parser = argparse.ArgumentParser(prog="python -m attention_course",
                                     description="Command line of the course 'Attention Is Learned Association'.")
    subparsers = parser.add_subparsers(dest="command", metavar="command")
    for name, cmd in commands().items():
        sub = subparsers.add_parser(name, help=cmd.help, description=cmd.description)
        target = cmd
        if isinstance(cmd, Command):
            module, _, obj = cmd.module.partition(":")
            target = importlib.import_module(module, __package__)
            target = getattr(target, obj) if obj else target
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
