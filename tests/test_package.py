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
