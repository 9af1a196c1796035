"""The heads kernels beyond the shared table (tests/ops/test_layer_ops_table.py): packed head
splits and merges."""
import numpy as np
import pytest

import reference_layers as ref
from gradcheck import on_cuda
from seqattn import ops


def _packed_qkv():
    return np.random.default_rng(0).normal(size=(2, 3, 3 * 8))  # (B, N, 3 * H * D), H=2, D=4


def test_split_packed_parts_and_merge_them_back():
    x = _packed_qkv()
    parts = ops.split_heads(x, 2, parts=3)
    for p, heads in enumerate(parts):
        np.testing.assert_array_equal(heads, ref.split_heads(x[:, :, 8 * p:8 * (p + 1)], 2))
    np.testing.assert_array_equal(ops.merge_heads(*parts), x)


def test_split_packed_parts_and_merge_on_cuda_match_cpu():
    x = _packed_qkv()
    for want, got in zip(ops.split_heads(x, 2, parts=3),
                         on_cuda(lambda x: ops.split_heads(x, 2, parts=3), x)):
        np.testing.assert_array_equal(got, want)
    parts = ops.split_heads(x, 2, parts=3)
    np.testing.assert_array_equal(on_cuda(ops.merge_heads, *parts), x)


def test_merge_heads_of_different_shapes_is_an_error():
    with pytest.raises(ValueError, match=r"heads\[1\] has shape"):
        ops.merge_heads(np.ones((1, 2, 3, 4)), np.ones((1, 2, 3, 2)))


@pytest.mark.parametrize("version", ["serial", "parallel"])
def test_cpu_split_and_merge_kernels_of_packed_parts_match_the_reference(version):
    from seqattn.kernels.cpu import heads as kernels

    x = np.random.default_rng(1).normal(size=(3, 5, 3 * 2 * 4))  # (B, N, 3 * H * D), H=2, D=4
    parts = np.empty((3, 3, 2, 5, 4))
    getattr(kernels.split_heads_forward, version)(parts, x)
    for p in range(3):
        np.testing.assert_array_equal(parts[p], ref.split_heads(x[:, :, 8 * p:8 * (p + 1)], 2))
    merged = np.empty_like(x)
    getattr(kernels.split_heads_backward, version)(merged, tuple(parts))
    np.testing.assert_array_equal(merged, x)
