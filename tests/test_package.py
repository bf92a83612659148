"""The package's public surface: a flat, curated __all__ and a light import."""

import subprocess
import sys

import attention_course as ac


def test_all_names_exist_and_are_unique():
    assert len(ac.__all__) == len(set(ac.__all__))
    missing = [name for name in ac.__all__ if not hasattr(ac, name)]
    assert not missing


def test_import_does_not_load_transformers():
    code = "import sys, attention_course; print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert out.stderr == ""


# ------------------------------------------------------------------ layering
import ast  # noqa: E402
from pathlib import Path  # noqa: E402

PACKAGE = Path(ac.__file__).parent
#: What each layer may import from the package (see attention_course/README.md).
ALLOWED = {
    "core": {"core"},
    "models": {"core", "models"},
    "lenses": {"core", "lenses"},
    "experiments": {"core", "models", "lenses", "experiments"},
    "course": {"core", "models", "lenses", "course"},
    "figures": {"core", "models", "lenses", "figures"},
}


def _package_imports(path: Path):
    """(layer imported, line, at module level?) for every import of the package in ``path``.

    Imports under ``if TYPE_CHECKING:`` are left out: they never run.
    """
    layer_of_file = path.relative_to(PACKAGE).parts
    tree = ast.parse(path.read_text())
    out = []

    def visit(node, top_level):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.ImportFrom):
                if child.level:  # relative: resolve against this file's folder
                    base = list(layer_of_file[:-1])[: len(layer_of_file) - child.level]
                    target = base + (child.module.split(".") if child.module else [])
                    if not target:  # `from .. import x`: x is a subpackage or module
                        target = [child.names[0].name]
                    out.append((target[0], child.lineno, top_level))
                elif child.module and child.module.startswith("attention_course."):
                    out.append((child.module.split(".")[1], child.lineno, top_level))
            is_scope = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            visit(child, top_level and not is_scope)

    visit(tree, True)
    return out


def _modules():
    return [p for p in sorted(PACKAGE.rglob("*.py")) if len(p.relative_to(PACKAGE).parts) > 1]


def test_imports_point_down_the_layers():
    wrong = []
    for path in _modules():
        layer = path.relative_to(PACKAGE).parts[0]
        for target, line, _ in _package_imports(path):
            if target not in ALLOWED[layer]:
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} ({layer}) imports {target}")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_package_imports_are_at_module_level():
    """A function-level import of the package usually dodges a cycle; the layers make none necessary."""
    inside = [f"{p.relative_to(PACKAGE)}:{line}" for p in _modules()
              for _, line, top in _package_imports(p) if not top]
    assert not inside, "imports of the package inside functions:\n" + "\n".join(inside)


def test_no_module_is_over_about_500_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 530}
    assert not long, f"split these modules (one concept each): {long}"
