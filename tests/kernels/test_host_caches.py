"""The host's cache sizes from sysfs, and the forward's query block that follows the L2."""
from seqattn.kernels.cpu.attention import BLOCK_Q, TALL_BLOCK_Q, forward_block_q
from seqattn.kernels.cpu.host_caches import cache_bytes


def fake_sysfs(root, entries):
    """A cache directory laid out as Linux's: index<i>/{level,type,size}."""
    for i, (level, kind, size) in enumerate(entries):
        entry = root / f"index{i}"
        entry.mkdir()
        (entry / "level").write_text(f"{level}\n")
        (entry / "type").write_text(f"{kind}\n")
        (entry / "size").write_text(f"{size}\n")
    return str(root)


def test_cache_sizes_are_read_per_level_data_or_unified(tmp_path):
    caches = fake_sysfs(tmp_path, [(1, "Data", "48K"), (1, "Instruction", "64K"),
                                   (2, "Unified", "2048K"), (3, "Unified", "480M")])
    assert cache_bytes(1, caches) == 48 * 1024, "L1 is the data cache, not the instruction one"
    assert cache_bytes(2, caches) == 2 * 1024 * 1024
    assert cache_bytes(3, caches) == 480 * 1024 * 1024


def test_unknown_caches_read_as_zero(tmp_path):
    assert cache_bytes(2, str(tmp_path / "missing")) == 0
    caches = fake_sysfs(tmp_path, [(1, "Data", "32K"), (2, "Unified", "garbled")])
    assert cache_bytes(2, caches) == 0, "an unreadable size is not a size"
    assert cache_bytes(1, caches) == 32 * 1024


def test_forward_tasks_are_taller_only_where_l2_holds_two_mib():
    assert forward_block_q(2 * 1024 * 1024) == TALL_BLOCK_Q  # Intel's server cores
    assert forward_block_q(1024 * 1024) == BLOCK_Q  # Zen 4 and 5
    assert forward_block_q(0) == BLOCK_Q  # sysfs silent: the smallest caches measured
    assert TALL_BLOCK_Q > BLOCK_Q
