"""Run the blind batteries of learner answers through the checks: one verdict and message per answer.

Each battery (``answers/<exercise-id>.py``, each with ``ANSWERS = [(name, fn, "correct"|"wrong",
"planted mistake")]``) was written by someone who saw only the exercises' statements. Answers to
the exercises whose cell picks earlier parts (``post-ln-block``,
``bert-encoder``; ``decoder-block``) use those names as the notebook does; the runner gives them the
package's parts, as the notebook's cell does while the earlier exercises are unsolved. The first
battery (issue 44) covers chapters 7 and 8, the second chapters 9 and 10.

``python tests/exercises/battery/battery_runner.py [out.json]`` prints one line per answer and writes the
verdicts; the same code runs under ``make test-extended`` (``test_battery.py``).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ANSWERS_DIR = Path(__file__).with_name("answers")
#: The first battery (issue 44): chapters 7 and 8.
#: (Chapter 8's layer-norm, gelu-feed-forward, bert-embeddings and sentence-embedding left it when they became
#: worked code in the lesson, and chapter 7's window-sweep when it became window-mask.)
FIRST = ("hopfield-retrieval", "bert-attention", "post-ln-block", "bert-encoder")
#: The second battery: chapters 9 and 10.
SECOND = ("rms-norm", "rope", "grouped-attention", "decoder-block", "decoder-forward", "next-token-probs",
          "next-token-loss")
#: The third: chapter 7's window-mask, written blind from its statement and the lesson (answers/NOTES_window_mask.md).
THIRD = ("window-mask",)
EXERCISES = FIRST + SECOND + THIRD


def _parts(eid: str) -> dict:
    """The names the notebook's exercise cell for ``eid`` picks, bound to the package's parts (stubs unsolved)."""
    if eid in SECOND:
        from attention_course.chapters import decoder as ch

        if eid != "decoder-block":
            return {}
        return {"rms_norm": ch.rms_norm, "rope": ch.apply_rope, "grouped_attention": ch.grouped_query_attention,
                "ch": ch}
    from attention_course.chapters import encoder as ch

    return {"self_attention": ch.self_attention, "layer_norm": ch.layer_norm, "feed_forward": ch.feed_forward,
            "embeddings": ch.embeddings, "post_ln_block": ch.block}


def load(eid: str, answers_dir: Path = ANSWERS_DIR):
    """The module of ``answers/<eid>.py``, with the cell's names set before its code runs and again after
    (an answer file may bind defaults of its own so that it imports alone)."""
    path = answers_dir / f"{eid}.py"
    spec = importlib.util.spec_from_file_location(f"battery_{eid.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    for name, fn in _parts(eid).items():
        setattr(module, name, fn)
    spec.loader.exec_module(module)
    for name, fn in _parts(eid).items():
        setattr(module, name, fn)
    return module


def run(eids=EXERCISES, answers_dir: Path = ANSWERS_DIR) -> list[dict]:
    """Every answer's verdict: exercise, name, label ("correct"/"wrong"), planted mistake, status, message."""
    from attention_course.exercises import evaluate

    rows = []
    for eid in eids:
        for name, fn, label, planted in load(eid, answers_dir).ANSWERS:
            result = evaluate(eid, fn)
            rows.append({"exercise": eid, "name": name, "label": label, "planted": planted,
                         "status": result.status, "message": result.message})
    return rows


def summary(rows: list[dict]) -> dict:
    """Per exercise: wrong answers caught, correct answers accepted."""
    out = {}
    for r in rows:
        s = out.setdefault(r["exercise"], {"wrong": 0, "caught": 0, "correct": 0, "accepted": 0})
        if r["label"] == "wrong":
            s["wrong"] += 1
            s["caught"] += r["status"] != "passed"
        else:
            s["correct"] += 1
            s["accepted"] += r["status"] == "passed"
    return out


if __name__ == "__main__":
    rows = run()
    for r in rows:
        print(f"{r['exercise']:20s} {r['name']:10s} {r['label']:7s} {r['status']:7s} | {r['planted']} | {r['message']}")
    for eid, s in summary(rows).items():
        print(f"{eid:20s} caught {s['caught']}/{s['wrong']}  accepted {s['accepted']}/{s['correct']}")
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(json.dumps(rows, indent=1))
