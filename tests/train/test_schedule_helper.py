"""warmup_and_decay: values pinned from the formula (linear warmup, cosine to final * lr)."""
import math

import pytest

from seqattn.train.schedules import warmup_and_decay


def test_values_follow_the_formula():
    schedule = warmup_and_decay(1e-3, epochs=4, steps_per_epoch=50)  # 200 steps, 10 warmup
    assert schedule(0) == pytest.approx(1e-4)
    assert schedule(9) == pytest.approx(1e-3)
    assert schedule(105) == pytest.approx(1e-4 + 0.5 * 9e-4 * (1 + math.cos(math.pi * 0.5)))
    assert schedule(200) == pytest.approx(1e-4)


def test_steps_per_epoch_may_be_the_batches():
    assert warmup_and_decay(1.0, 2, list(range(5)), warmup=0.2)(0) == pytest.approx(0.5)


def test_too_short_a_run_is_named():
    with pytest.raises(ValueError, match="epochs \\* steps_per_epoch = 1 \\* 1 = 1"):
        warmup_and_decay(1e-3, 1, 1)
