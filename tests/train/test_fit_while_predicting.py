"""One model, several threads: ``fit`` trains it in one thread while another predicts with it
(as seqattn.predict calls it), and training ends bit for bit where it ends alone; a forward in
one thread never replaces what another thread's backward needs; a model switched to eval() by
another thread meanwhile gets an error that says so."""
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from seqattn import nn
from seqattn.data.model_call import ModelCall
from seqattn.train import AdamW, MSELoss, fit
from train_tasks import delayed_copy, one_numba_thread, small_token_model  # noqa: F401


def _train(model):
    x, y = delayed_copy(32, 0)
    return fit(model, MSELoss(), AdamW(model, lr=3e-3), (x, y), epochs=3, batch_size=8,
               validation=delayed_copy(16, 1), seed=2, progress=False)


def test_fit_ends_as_it_does_alone_while_another_thread_predicts():
    alone = small_token_model(dropout=0.1)
    history_alone = _train(alone)
    model = small_token_model(dropout=0.1)
    batch = SimpleNamespace(tokens=delayed_copy(4, 3)[0], key_padding_mask=None, coords=None)
    predictions, failures, training = [], [], threading.Event()

    def predict_until_trained():
        training.wait()
        try:
            while training.is_set():
                predictions.append(ModelCall(model)(batch))
        except Exception as error:  # reported below, from the main thread
            failures.append(error)

    predictor = threading.Thread(target=predict_until_trained)
    predictor.start()
    training.set()
    try:
        history = _train(model)
    finally:
        training.clear()
        predictor.join()
    assert not failures, failures
    assert len(predictions) > 3 and all(np.isfinite(p).all() for p in predictions)
    assert history == history_alone
    for name, weights in alone.state_dict().items():
        np.testing.assert_array_equal(model.state_dict()[name], weights, err_msg=name)
    assert model.training


def _in_a_thread(function):
    worker = threading.Thread(target=function)
    worker.start()
    worker.join()


def test_a_forward_in_another_thread_leaves_this_threads_backward_its_own():
    linear = nn.Linear(3, 2, seed=1)
    x, other = np.ones((4, 3), np.float32), np.full((5, 3), 7.0, np.float32)
    dout = np.arange(8, dtype=np.float32).reshape(4, 2)
    linear(x)
    alone = linear.backward(dout)
    expected = linear.weight.grad.copy()
    linear.zero_grad()
    linear(x)
    _in_a_thread(lambda: linear(other))
    _in_a_thread(lambda: linear.eval() and linear.train())
    np.testing.assert_array_equal(linear.backward(dout), alone)
    np.testing.assert_array_equal(linear.weight.grad, expected)


def test_a_model_switched_to_eval_by_another_thread_cannot_train_and_says_why():
    linear = nn.Linear(3, 2, seed=1)
    _in_a_thread(linear.eval)
    linear(np.ones((4, 3), np.float32))
    with pytest.raises(RuntimeError, match=r"last forward in this thread ran in evaluation mode"
                                           r".* another thread calls .eval\(\).* model.mode"):
        linear.backward(np.ones((4, 2), np.float32))


def test_mode_sets_the_calling_threads_mode_only():
    model = small_token_model(dropout=0.5)
    seen = {}
    with model.mode(False):
        _in_a_thread(lambda: seen.update(other=[m.training for _, m in model.named_modules()]))
        seen["here"] = [m.training for _, m in model.named_modules()]
    assert not any(seen["here"]) and all(seen["other"]) and model.training
