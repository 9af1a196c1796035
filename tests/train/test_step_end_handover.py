"""On a first run, fit hands the helper process (seqattn.compile) the kernels that end each
training step, before its first step: the gradients' norm and, with Adam, the one-launch
update. The helper compiles them after every backward job; the run's launches wait for it."""
import numpy as np
import pytest

import seqattn.compile
import seqattn.first_run
from seqattn.compile import ADAM_MANY, GRADIENT_NORM, JOB_PRIORITY, STEP_END_PRIORITY
from seqattn.first_run import CompileNotice
from seqattn.kernels import compiled_elsewhere
from seqattn.models import TokenModel, TokenModelConfig
from seqattn.train import SGD, AdamW, EarlyStopping, MSELoss, fit


def _fit(optimizer=AdamW, dtype=np.float32, **options):
    x = np.random.default_rng(0).standard_normal((4, 6, 3)).astype(dtype)
    model = TokenModel(TokenModelConfig(in_features=3, out_features=2, d_model=8, nhead=2,
                                        num_layers=0, dim_feedforward=8, max_len=6))
    if dtype != np.float32:
        model.to(dtype=dtype)
    fit(model, MSELoss(), optimizer(model, lr=1e-3), (x, x[..., :2]), epochs=1, batch_size=4,
        progress=False, **options)


@pytest.fixture
def handed(monkeypatch):
    """The jobs a notice of this process hands over, as (job, launches, priority), with a
    stand-in helper; the fits' kernels compiled beforehand, and the process's own notice
    kept from starting a helper."""
    for optimizer, dtype in ((AdamW, np.float32), (SGD, np.float32), (AdamW, np.float64)):
        _fit(optimizer, dtype)
    monkeypatch.setattr(seqattn.first_run._NOTICE, "start_helper", False)
    # the stand-in notice's start hands C functions' requests to it: for this test only
    monkeypatch.setattr(compiled_elsewhere, "_hand_over_function", None)
    jobs = []
    monkeypatch.setattr(seqattn.compile, "start_helper", lambda: "lock")
    monkeypatch.setattr(seqattn.compile, "hand_over_products", lambda lock: None)
    monkeypatch.setattr(seqattn.compile, "hand_over",
                        lambda lock, job, launches, on_wait, priority=JOB_PRIORITY:
                        jobs.append((job, launches, priority)))
    monkeypatch.setattr(seqattn.first_run, "_NOTICE", CompileNotice(start_helper=True))
    return jobs


def test_fit_hands_the_end_of_its_step_to_a_helper_that_starts_later(handed):
    _fit()
    assert handed == [], "no helper yet (a warm run never has one)"
    seqattn.first_run._NOTICE.start_helper_once()
    assert handed == [("adam-step", (GRADIENT_NORM, ADAM_MANY), STEP_END_PRIORITY)]


def test_fit_hands_the_end_of_its_step_to_a_running_helper_once(handed):
    seqattn.first_run._NOTICE.start_helper_once()
    for optimizer in (AdamW, AdamW, SGD):
        _fit(optimizer)
    assert handed == [("adam-step", (GRADIENT_NORM, ADAM_MANY), STEP_END_PRIORITY),
                      ("gradient-norm", (GRADIENT_NORM,), STEP_END_PRIORITY)]


def test_fit_hands_nothing_over_for_float64_parameters(handed):
    seqattn.first_run._NOTICE.start_helper_once()
    _fit(dtype=np.float64)
    assert handed == [], "the helper's jobs have float32 signatures"


def test_fit_hands_over_the_end_of_its_step_before_a_validation_pass(handed, monkeypatch):
    """early_stopping's include_start scores the model before training: its compilations (a
    first run's first ones, as a rule) already have the helper at work on the step's end."""
    import importlib

    fit_module = importlib.import_module("seqattn.train.fit")  # the package's fit is the function
    seqattn.first_run._NOTICE.start_helper_once()
    handed_then, evaluate = [], fit_module.evaluate
    monkeypatch.setattr(fit_module, "evaluate",
                        lambda *args, **kwargs: handed_then.append(list(handed))
                        or evaluate(*args, **kwargs))
    x = np.ones((4, 6, 3), np.float32)
    _fit(validation=(x, x[..., :2]), early_stopping=EarlyStopping(include_start=True))
    assert handed_then[0] == [("adam-step", (GRADIENT_NORM, ADAM_MANY), STEP_END_PRIORITY)]


@pytest.mark.parametrize("optimizer", [object(), None, "adam"], ids=["object", "None", "str"])
def test_the_hint_hands_nothing_over_and_raises_nothing_for_what_is_not_an_optimizer(
        handed, optimizer):
    """fit's first line is this hint: a wrong argument must reach fit's own handling."""
    seqattn.first_run._NOTICE.start_helper_once()
    seqattn.first_run.hand_over_step_end(optimizer)
    assert handed == []
