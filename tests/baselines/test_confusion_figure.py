"""seqattn.confusion_figure: the counts it draws, the figure it writes, the labels it refuses."""
import numpy as np
import pytest

import seqattn


def test_counts_rows_by_true_class_and_columns_by_predicted(tmp_path):
    truth = np.array(["a", "a", "b", "c", "c", "c"])
    predicted = np.array(["a", "b", "b", "c", "a", "c"])
    counts = seqattn.confusion_figure(truth, predicted, ["a", "b", "c"], tmp_path / "m.png",
                                      title="toy")
    np.testing.assert_array_equal(counts, [[1, 1, 0], [0, 1, 0], [1, 0, 2]])
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_integer_labels_in_the_order_given(tmp_path):
    counts = seqattn.confusion_figure(np.array([2, 0, 2]), np.array([2, 2, 0]), [2, 0],
                                      tmp_path / "m.png", names=["two", "zero"])
    np.testing.assert_array_equal(counts, [[1, 1], [1, 0]])


def test_a_label_outside_classes_and_unequal_lengths_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"labels \['d'\] are not among classes"):
        seqattn.confusion_figure(["a", "d"], ["a", "a"], ["a", "b"], tmp_path / "m.png")
    with pytest.raises(ValueError, match="truth and predicted must be 1-D and of one length"):
        seqattn.confusion_figure(["a"], ["a", "b"], ["a", "b"], tmp_path / "m.png")
    assert not (tmp_path / "m.png").exists()
