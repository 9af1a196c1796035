"""The examples' tests leave their printed tables and figures for the gallery when
SEQATTN_GALLERY_OUTPUTS names a folder (tests/helpers/example_outputs.py; .ci/run sets it and
builds the documentation after the tests)."""
import argparse

import pytest

from example_outputs import ExampleRecorder, outputs_folder


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Note on the test whether its call passed: only a passing run's outputs are kept."""
    report = (yield).get_result()
    if report.when == "call":
        item.passed_call = report.passed


@pytest.fixture(autouse=True)
def keep_gallery_outputs(request, monkeypatch, tmp_path_factory):
    folder = outputs_folder()
    if folder is None:
        yield
        return
    recorder = ExampleRecorder(request.getfixturevalue("capsys"),
                               tmp_path_factory.mktemp("gallery_figures"))
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args",
                        lambda parser, args=None, namespace=None:
                        recorder.parse_args(parser, args, namespace))
    yield
    recorder.publish(folder if getattr(request.node, "passed_call", False) else None)
