"""fit(..., average=EMA(...)): the average follows the weights step by step with the documented
rate; validation, early stopping, checkpoints and the returned model use the averaged weights;
an interrupted averaged run resumes exactly; a checkpoint with the other choice is refused."""
import numpy as np
import pytest

import seqattn
from seqattn.train import EMA, SGD, AdamW, EarlyStopping, MSELoss, evaluate, fit, load_checkpoint
from train_tasks import delayed_copy, one_numba_thread, small_token_model  # noqa: F401

QUIET = dict(progress=False)


class _RecordingSGD(SGD):
    """SGD that keeps a float64 copy of the weights after every step."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.after_steps = []

    def step(self, grad_scale=1.0):
        super().step(grad_scale)
        self.after_steps.append({name: p.data.astype(np.float64) for name, p in self.params})


def _ema_by_hand(start, after_steps, decay):
    """The average the EMA docstring defines, in float64."""
    average = {name: value.astype(np.float64) for name, value in start.items()}
    for t, weights in enumerate(after_steps, start=1):
        rate = min(decay, (1 + t) / (10 + t))
        for name in average:
            average[name] = rate * average[name] + (1 - rate) * weights[name]
    return average


def test_the_model_ends_with_the_average_of_its_steps_and_validation_scores_it():
    model = small_token_model()
    start = model.state_dict()
    optimizer = _RecordingSGD(model, lr=3e-2)
    validation = delayed_copy(32, 1)
    history = fit(model, MSELoss(), optimizer, delayed_copy(64, 0), epochs=3, batch_size=16,
                  validation=validation, average=EMA(0.8), **QUIET)
    expected = _ema_by_hand(start, optimizer.after_steps, 0.8)
    assert len(optimizer.after_steps) == 12
    final = model.state_dict()
    for name, value in final.items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-5, atol=1e-6, err_msg=name)
    # the averaged weights are not the last step's (which the next step would start from)
    assert not np.allclose(np.concatenate([v.ravel() for v in final.values()]),
                           np.concatenate([v.ravel() for v in optimizer.after_steps[-1].values()]),
                           rtol=1e-3, atol=1e-4)
    assert history["val_loss"][-1] == pytest.approx(
        evaluate(model, MSELoss(), validation, batch_size=32)["loss"], rel=1e-6)


def test_training_continues_from_the_raw_weights_not_the_average():
    """The steps are those of a run without averaging: the same raw weights at every step."""
    runs = []
    for average in (None, EMA(0.9)):
        model = small_token_model()
        optimizer = _RecordingSGD(model, lr=3e-2)
        fit(model, MSELoss(), optimizer, delayed_copy(64, 0), epochs=2, batch_size=16,
            validation=delayed_copy(32, 1), average=average, **QUIET)
        runs.append(optimizer.after_steps)
    for plain, averaged in zip(*runs):
        for name in plain:
            np.testing.assert_array_equal(plain[name], averaged[name], err_msg=name)


def test_early_stopping_keeps_the_best_averaged_weights():
    model = small_token_model()
    validation = delayed_copy(32, 1)
    stopper = EarlyStopping(patience=2)
    history = fit(model, MSELoss(), AdamW(model, lr=3e-3), delayed_copy(64, 0), epochs=6,
                  batch_size=16, validation=validation, early_stopping=stopper,
                  average=EMA(0.9), **QUIET)
    best = history["val_loss"][stopper.best_epoch]
    assert best == min(history["val_loss"])
    assert evaluate(model, MSELoss(), validation, batch_size=16)["loss"] == pytest.approx(
        best, rel=1e-6)


def _averaged_run(folder, epochs, resume=False, average=True):
    model = small_token_model(dropout=0.1)
    optimizer = AdamW(model, lr=3e-3)
    history = fit(model, MSELoss(), optimizer, delayed_copy(64, 0), epochs=epochs,
                  batch_size=16, validation=delayed_copy(32, 1), seed=5,
                  average=EMA(0.9) if average else None, checkpoint=folder, resume=resume,
                  **QUIET)
    return model, history


def test_an_averaged_run_resumes_exactly_and_its_checkpoint_loads_as_the_averaged_model(tmp_path):
    full, full_history = _averaged_run(tmp_path / "full", epochs=4)
    _averaged_run(tmp_path / "run", epochs=2)
    resumed, resumed_history = _averaged_run(tmp_path / "run", epochs=4, resume=True)
    assert resumed_history == full_history
    for name, value in full.state_dict().items():
        np.testing.assert_array_equal(resumed.state_dict()[name], value, err_msg=name)
    x, _ = delayed_copy(8, 2)
    np.testing.assert_array_equal(seqattn.load(tmp_path / "run").eval()(x), full.eval()(x))
    # what resuming continues from is the raw weights, kept beside the averaged ones
    raw = small_token_model(dropout=0.1)
    load_checkpoint(tmp_path / "full", raw)
    assert not np.allclose(raw.eval()(x), full.eval()(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("first, then", [(True, False), (False, True)])
def test_resuming_with_the_other_choice_of_averaging_is_refused(tmp_path, first, then):
    _averaged_run(tmp_path, epochs=1, average=first)
    with pytest.raises(ValueError, match="resume with the same average as the interrupted run"):
        _averaged_run(tmp_path, epochs=2, resume=True, average=then)


@pytest.mark.parametrize("decay", [0.0, 1.0, 1.5, -0.1, True, "0.9"])
def test_a_decay_outside_zero_to_one_is_named(decay):
    with pytest.raises(ValueError, match="decay must be a number in \\(0, 1\\)"):
        EMA(decay)


def test_a_numpy_decay_is_a_number():
    assert EMA(np.float32(0.9)).decay == pytest.approx(0.9)


def test_an_average_that_is_not_an_ema_is_named():
    model = small_token_model()
    with pytest.raises(TypeError, match="average must be a seqattn.train.EMA"):
        fit(model, MSELoss(), SGD(model, lr=1e-2), delayed_copy(16, 0), average=0.99, **QUIET)


def test_an_average_used_outside_fit_says_how_to_attach_it():
    with pytest.raises(RuntimeError, match="average=EMA"):
        EMA().update()


@pytest.mark.parametrize("name", ["signal", "residues"])
def test_an_averaged_fit_through_the_adapter_path_predicts_and_stores_what_it_kept(name,
                                                                                   tmp_path):
    """Reader-made Dataset, adapter, model, fit with an average and a checkpoint, predict back
    onto the Dataset, save and load: the loaded model and the checkpoint predict the same."""
    import xarray as xr
    from conformance import rows
    from seqattn.models import build

    row = next(r for r in rows() if r.name == name)
    dataset = row.make_dataset()
    adapter = row.make_adapter().fit(dataset, targets=row.targets, where=row.train)
    model = build(adapter.model_config(task=row.task, **row.model_options))
    batches = adapter.batches(dataset, where=row.train, batch_size=4, shuffle=True, seed=0)
    history = fit(model, row.loss(), AdamW(model, lr=3e-3), batches, epochs=3,
                  validation=adapter.batches(dataset, where=row.test, batch_size=4),
                  average=EMA(0.9), checkpoint=tmp_path / "run", **QUIET)
    assert np.isfinite(history["val_loss"]).all()
    out = seqattn.predict(model, dataset, adapter)
    seqattn.save(model, tmp_path / "model")
    xr.testing.assert_identical(seqattn.predict(seqattn.load(tmp_path / "model"), dataset,
                                                adapter), out)
    xr.testing.assert_identical(seqattn.predict(seqattn.load(tmp_path / "run"), dataset,
                                                adapter), out)
