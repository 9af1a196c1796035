"""Every public package imports on its own, first, in a fresh interpreter: a circular import
shows only when the package that starts the cycle is the first one imported (the test session
imports them in one order only)."""
import subprocess
import sys

import pytest

PUBLIC = ["seqattn", "seqattn.adapters", "seqattn.autodiff", "seqattn.baselines",
          "seqattn.compile", "seqattn.data", "seqattn.evaluation", "seqattn.graphs",
          "seqattn.models", "seqattn.nn", "seqattn.nn.positional", "seqattn.ops",
          "seqattn.readers", "seqattn.storage", "seqattn.train"]


@pytest.mark.parametrize("package", PUBLIC)
def test_a_public_package_imports_first_in_a_fresh_interpreter(package):
    done = subprocess.run([sys.executable, "-c", f"import {package}"], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-2000:]
