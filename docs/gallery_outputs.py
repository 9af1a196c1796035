"""Run the examples' quick modes and keep what they print and draw, for the gallery pages.

    python docs/gallery_outputs.py                    # every example in examples/
    python docs/gallery_outputs.py digits long_range  # those examples only

For each example it runs ``python examples/<name>.py --quick`` (with ``--plot`` or ``--out``
pointed at ``docs/_gallery_outputs/<name>/`` when the example takes one), writes what it printed
to ``output.txt`` there, and leaves its figures (PNG) beside it. The next documentation build
shows them on the example's gallery page. A failing example is reported and the others still
run; the exit status says whether all succeeded.
"""
import argparse
import subprocess
import sys
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
OUTPUTS = DOCS / "_gallery_outputs"


def figure_options(script, out):
    """The options that make `script` save its figures under `out`, read from its --help."""
    usage = subprocess.run([sys.executable, str(script), "--help"], capture_output=True,
                           text=True, cwd=ROOT).stdout
    if "--plot" in usage:
        return ["--plot", str(out / f"{script.stem}.png")]
    if "--out" in usage:
        return ["--out", str(out)]
    return []


def run(script):
    out = OUTPUTS / script.stem
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*"):
        old.unlink()
    command = [sys.executable, str(script), "--quick", *figure_options(script, out)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    (out / "output.txt").write_text(done.stdout)
    status = "ok" if done.returncode == 0 else f"FAILED ({done.returncode})"
    print(f"{script.stem}: {status} in {seconds:.0f} s; {len(list(out.glob('*.png')))} figures")
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
    return done.returncode == 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", nargs="*", help="example names (default: all)")
    args = parser.parse_args(argv)
    scripts = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))
    if args.examples:
        known = {p.stem: p for p in scripts}
        unknown = sorted(set(args.examples) - set(known))
        if unknown:
            parser.error(f"no example named {', '.join(unknown)}; examples: "
                         f"{', '.join(sorted(known))}")
        scripts = [known[name] for name in args.examples]
    results = [run(script) for script in scripts]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
