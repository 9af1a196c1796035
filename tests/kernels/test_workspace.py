"""Scratch buffers kept between calls (kernels/cpu/workspace.py)."""
import threading

import numpy as np

import seqattn
from seqattn.kernels.cpu import workspace
from seqattn.kernels.cpu.attention_small import MAX_LENGTH


def test_a_name_gets_the_same_memory_while_it_is_large_enough():
    workspace.release_scratch()
    first = workspace.scratch("operand", (4, 100), np.uint16)
    assert first.shape == (4, 100) and first.dtype == np.uint16
    assert first.flags.c_contiguous and first.ctypes.data % 64 == 0
    smaller = workspace.scratch("operand", (3, 10), np.uint16)
    assert smaller.ctypes.data == first.ctypes.data
    larger = workspace.scratch("operand", (5, 100), np.uint16)
    assert larger.shape == (5, 100) and larger.ctypes.data % 64 == 0
    assert workspace.held_bytes() == larger.nbytes


def test_names_and_dtypes_get_their_own_memory():
    workspace.release_scratch()
    a = workspace.scratch("a", (64,), np.float32)
    b = workspace.scratch("b", (64,), np.float32)
    assert a.ctypes.data != b.ctypes.data
    a_as_bits = workspace.scratch("a", (64,), np.uint16)
    assert a_as_bits.dtype == np.uint16
    assert workspace.held_bytes() == b.nbytes + a_as_bits.nbytes


def test_release_frees_what_the_thread_holds():
    workspace.scratch("a", (1000,), np.float32)
    assert workspace.held_bytes() >= 4000
    workspace.release_scratch()
    assert workspace.held_bytes() == 0


def test_each_thread_has_its_own_buffers():
    workspace.release_scratch()
    mine = workspace.scratch("a", (256,), np.float32)
    theirs = []
    worker = threading.Thread(target=lambda: theirs.append(
        (workspace.scratch("a", (256,), np.float32).ctypes.data, workspace.held_bytes())))
    worker.start()
    worker.join()
    assert theirs[0][0] != mine.ctypes.data
    assert theirs[0][1] == mine.nbytes
    assert workspace.held_bytes() == mine.nbytes


def test_seqattn_release_scratch_gives_back_what_attention_keeps():
    workspace.release_scratch()
    # long enough for the tiled kernel, which keeps scratch (the short one holds none)
    n = MAX_LENGTH + 1
    q = np.random.default_rng(0).standard_normal((1, 2, n, 32)).astype(np.float32)
    seqattn.attention(q, q, q)
    assert workspace.held_bytes() > 0
    seqattn.release_scratch()
    assert workspace.held_bytes() == 0
