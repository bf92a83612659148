"""Regenerate attention_course/chapters/<topic>/__init__.py from the modules' ``__all__`` (run after changing one).

Usage: ``python .ci/chapter_faces.py``; ``tests/test_package.py`` fails while a face is stale.
"""
import ast, sys
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]
P = ROOT / "attention_course"
CHAPTERS = {1: "mechanics", 2: "kernels", 3: "lowrank", 4: "heads", 5: "graphs", 6: "scaling", 7: "insight", 8: "encoder", 9: "decoder", 10: "gpt"}
TITLES = {1: "The mechanics of scaled dot-product attention", 2: "Attention as kernel smoothing",
          3: "Low rank, and why efficient attention works", 4: "Multi-head attention as subspaces",
          5: "Self-attention as message passing", 6: "Why 1/sqrt(d_k) matters", 7: "The insight", 8: "Build it",
          9: "Build a GPT",
          10: "A GPT at work"}
ORDER_LAST = ["runs", "benchmarks", "figures", "sliders", "exercises"]
SKIP = ("main", "cli", "add_arguments", "VARIANTS")
for num, topic in CHAPTERS.items():
    folder = P / "chapters" / topic
    if not folder.is_dir():
        continue
    mods = sorted((p.stem for p in folder.glob("*.py") if p.stem != "__init__"),
                  key=lambda s: (ORDER_LAST.index(s) if s in ORDER_LAST else -1, s))
    lines, seen = [], {}
    for m in mods:
        tree = ast.parse((folder / f"{m}.py").read_text())
        names = []
        for st in tree.body:
            if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in st.targets):
                names = [ast.literal_eval(e) for e in st.value.elts]
        for n in names:
            if n in seen and n not in SKIP:
                print(f"note: {topic}: {n} is in both {seen[n]} and {m}; the face takes {seen[n]}'s", file=sys.stderr)
        names = [n for n in names if n not in seen and n not in SKIP]
        for n in names:
            seen[n] = m
        if names:
            body = ", ".join(names)
            lines.append(f"from .{m} import {body}" if len(body) < 80 else
                         f"from .{m} import (\n" + "".join(f"    {n},\n" for n in names) + ")")
        else:
            lines.append(f"from . import {m}  # noqa: F401")
    doc = (f'"""Chapter {num}, {TITLES[num]}: everything the chapter computes, draws and checks.\n\n'
           f'One module per concept ({", ".join(f"``{m}``" for m in mods)}); their public names are\n'
           f're-exported here, flat, so the notebook imports one thing:\n'
           f'``from attention_course.chapters import {topic} as ch``. Generated: after changing a module\'s\n'
           f'``__all__``, regenerate it (see attention_course/README.md).\n"""\n\n')
    (folder / "__init__.py").write_text(doc + "\n".join(lines) + "\n\n__all__ = [\n" +
                                        "".join(f'    "{n}",\n' for n in seen) + "]\n")
