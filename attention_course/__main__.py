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
