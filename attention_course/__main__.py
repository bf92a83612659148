"""``python -m attention_course <command>``: the course's command line.

Commands
--------
progress
    Run your chapter notebooks and list every exercise: passed, failed (with
    the feedback) or not attempted. See :mod:`attention_course.progress`.
evidence
    Check the claims ledger against the chapters and rewrite the evidence the
    package ships (``attention_course/data/evidence.json``) from the numbers
    the chapters glued. See :mod:`attention_course.claims`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser, one subparser per command."""
    from . import progress

    parser = argparse.ArgumentParser(prog="python -m attention_course",
                                     description="Command line of the course 'Attention Is Learned Association'.")
    commands = parser.add_subparsers(dest="command", metavar="command")
    p = commands.add_parser("progress", help="run your notebooks and list your exercises' results",
                            description="Run your chapter notebooks and list every exercise: passed, failed (with "
                            "its feedback), not attempted or not run. By default only the setup cells and the "
                            "exercise cells run (fast); --full runs every cell.")
    progress.add_arguments(p)
    p.set_defaults(run=progress.main, parser=p)  # its own parser, for usage errors (exit 2)
    e = commands.add_parser("evidence", help="rewrite the ledger's evidence from the chapters' glued numbers",
                            description="Check every claim of attention_course/claims.py against its chapter's "
                            "verdict box, then write the numbers the chapters glued to the evidence file.")
    e.add_argument("--book", default="book", help="folder of the chapter notebooks (default: book)")
    e.add_argument("--out", default=None, help="where to write (default: the package's data/evidence.json)")
    e.set_defaults(run=_evidence, parser=e)
    return parser


def _evidence(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """The ``evidence`` command: refuse to write while the ledger and the chapters disagree."""
    from pathlib import Path

    from . import claims, verdicts

    book = Path(args.book)
    if not book.is_dir():
        parser.error(f"no folder {book}: run this in the course folder or pass --book")
    problems = verdicts.chapter_problems(book)
    if problems:
        print("The ledger and the chapters disagree; nothing was written:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    out = verdicts.write_evidence(book, args.out or claims.EVIDENCE_FILE)
    print(f"wrote the evidence of {len(claims.CLAIMS)} claims to {out}")
    return 0


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
