"""The examples' tests keep what an example printed and drew for the gallery
(tests/helpers/example_outputs.py), on a stand-in example script."""
import argparse
import importlib.util
import textwrap

import pytest

import example_outputs

SCRIPT = textwrap.dedent('''
    """A stand-in example."""
    import argparse
    from pathlib import Path


    def main(argv=None):
        parser = argparse.ArgumentParser()
        parser.add_argument("--quick", action="store_true")
        parser.add_argument("--plot", default=None)
        parser.add_argument("--out", default=None)
        args = parser.parse_args(argv)
        print("score 0.75 against 0.50")
        if args.plot:
            Path(args.plot).write_bytes(b"plot")
            print(f"figure saved to {args.plot}")
        if args.out:
            Path(args.out, "parity.png").write_bytes(b"parity")
        return args
''')


@pytest.fixture
def example(tmp_path, monkeypatch):
    """The stand-in script, loaded as the tests load examples, from a folder taken for
    examples/."""
    folder = tmp_path / "examples"
    folder.mkdir()
    (folder / "standin.py").write_text(SCRIPT)
    monkeypatch.setattr(example_outputs, "EXAMPLES", folder)
    spec = importlib.util.spec_from_file_location("standin", folder / "standin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def recorder(tmp_path, capsys, monkeypatch):
    recorder = example_outputs.ExampleRecorder(capsys, tmp_path / "scratch")
    (tmp_path / "scratch").mkdir()
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args",
                        lambda parser, args=None, namespace=None:
                        recorder.parse_args(parser, args, namespace))
    return recorder


def test_a_run_leaves_its_printed_text_and_its_figure(example, recorder, tmp_path):
    print("printed by the test before the example ran")
    args = example.main(["--quick"])
    assert args.plot == str(tmp_path / "scratch" / "standin.png")  # the test gave no --plot
    recorder.publish(tmp_path / "site")
    kept = tmp_path / "site" / "standin"
    assert (kept / "output.txt").read_text() == ("score 0.75 against 0.50\n"
                                                 "figure saved to standin.png\n")
    assert (kept / "standin.png").read_bytes() == b"plot"
    assert sorted(p.name for p in kept.iterdir()) == ["output.txt", "standin.png"]


def test_figures_in_the_out_folder_are_kept_and_old_ones_go(example, recorder, tmp_path):
    kept = tmp_path / "site" / "standin"
    kept.mkdir(parents=True)
    (kept / "from_an_older_run.png").write_bytes(b"old")
    out = tmp_path / "out"
    out.mkdir()
    example.main(["--quick", "--out", str(out), "--plot", str(out / "given.png")])
    recorder.publish(tmp_path / "site")
    assert sorted(p.name for p in kept.glob("*.png")) == ["given.png", "parity.png"]
    assert (kept / "parity.png").read_bytes() == b"parity"


def test_a_failed_run_and_other_parsers_leave_nothing(example, recorder, tmp_path):
    parser = argparse.ArgumentParser()
    parser.add_argument("--plot", default=None)
    assert parser.parse_args([]).plot is None        # not called from an example
    example.main(["--quick"])
    recorder.publish(None)                           # the test failed
    assert not (tmp_path / "site").exists()


def test_the_outputs_folder_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(example_outputs.ENVIRONMENT, raising=False)
    assert example_outputs.outputs_folder() is None
    monkeypatch.setenv(example_outputs.ENVIRONMENT, str(tmp_path))
    assert example_outputs.outputs_folder() == tmp_path.resolve()
