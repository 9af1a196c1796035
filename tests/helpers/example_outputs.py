"""Keep what an example's test run printed and drew, for the documentation's gallery.

When the environment variable ``SEQATTN_GALLERY_OUTPUTS`` names a folder (``.ci/run`` sets
``docs/_gallery_outputs``), every test in ``tests/examples`` that runs an example's ``main``
leaves in ``<folder>/<example>/`` what ``main`` printed (``output.txt``) and the figures it saved
(PNG): the layout that ``docs/gallery_outputs.py`` writes and the gallery pages read. The test's
own run is kept, so nothing is trained a second time for the documentation.

The examples are command-line scripts: the recorder wraps ``argparse.ArgumentParser.parse_args``
for the duration of a test, learns from the call stack which script in ``examples/`` is parsing
its options, and gives a ``--plot`` option the test left out a file to draw into. Figures an
example writes under its ``--out`` folder are collected from that folder.
"""
import argparse
import os
import sys
from pathlib import Path

ENVIRONMENT = "SEQATTN_GALLERY_OUTPUTS"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def outputs_folder():
    """The folder named by SEQATTN_GALLERY_OUTPUTS, or None when the outputs are not kept."""
    folder = os.environ.get(ENVIRONMENT)
    return Path(folder).resolve() if folder else None


def calling_example():
    """The name of the script in examples/ whose code is on the call stack, innermost first."""
    frame = sys._getframe(1)
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if path.suffix == ".py" and path.resolve().parent == EXAMPLES:
            return path.stem
        frame = frame.f_back
    return None


def write_atomically(path, data):
    """Write bytes whole or not at all: a documentation build reading the folder while the
    tests write it (tests/docs builds the site in the same pytest run) sees the old file or
    the new one."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


class ExampleRecorder:
    """Records the examples one test runs; `publish` writes their outputs.

    ``capture`` is pytest's capsys fixture: what an example printed is what the test's output
    holds from the moment the example parsed its options to the end of the test (what the test
    printed before that is dropped; pytest's report shows the rest as usual).
    """

    def __init__(self, capture, scratch):
        self.capture = capture
        self.scratch = Path(scratch)
        self.runs = {}  # example name -> the options its main parsed
        self.original = argparse.ArgumentParser.parse_args

    def parse_args(self, parser, args=None, namespace=None):
        """ArgumentParser.parse_args, noting which example parsed and giving it a figure."""
        options = self.original(parser, args, namespace)
        name = calling_example()
        if name is None:
            return options
        if getattr(options, "plot", False) is None:
            options.plot = str(self.scratch / f"{name}.png")
        self.capture.readouterr()
        self.runs[name] = options
        return options

    def figures(self, options):
        found = []
        if getattr(options, "plot", None):
            found.append(Path(options.plot))
        if getattr(options, "out", None) and Path(options.out).is_dir():
            found += sorted(Path(options.out).glob("*.png"))
        return [figure for figure in found if figure.is_file()]

    def publish(self, folder):
        """Write each recorded example's printed text and figures under `folder` (None: a
        failed test, nothing is written)."""
        out = self.capture.readouterr().out
        for name, options in (self.runs.items() if folder is not None else ()):
            target = folder / name
            target.mkdir(parents=True, exist_ok=True)
            figures = self.figures(options)
            printed = out
            for figure in figures:
                write_atomically(target / figure.name, figure.read_bytes())
                printed = printed.replace(str(figure), figure.name)  # not the test's scratch path
            write_atomically(target / "output.txt", printed.encode())
            kept = {figure.name for figure in figures}
            for stale in target.glob("*.png"):
                if stale.name not in kept:
                    stale.unlink()
