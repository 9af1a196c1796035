"""The data caches of one core of the host CPU, which the CPU attention's tiles are sized for.

Read once, at import, from Linux's sysfs (``/sys/devices/system/cpu/cpu0/cache/index*``: level,
type and size of each cache). Where sysfs says nothing (another OS, a container that hides it),
the sizes of the machine the tiles were first tuned on, the Intel Xeon (Emerald Rapids): 48 KiB
L1d and 2 MiB L2, so that such a host keeps those tiles. The two kinds measured so far
(BENCHMARKS.md, "Tiles per cache size"): Intel Xeon 48 KiB / 2 MiB, AMD EPYC Zen 4 32 KiB / 1 MiB.
"""
import glob
import os

KIB = 1024
# The Intel Xeon's, on which today's tiles were measured: the fallback.
FALLBACK_L1D = 48 * KIB
FALLBACK_L2 = 2048 * KIB

_UNITS = {"K": KIB, "M": KIB * KIB, "G": KIB * KIB * KIB}


def parse_size(text):
    """Bytes from a sysfs cache size such as "32K", "1024K" or "2M"; None if unreadable."""
    text = text.strip()
    if not text:
        return None
    unit = _UNITS.get(text[-1].upper())
    digits = text[:-1] if unit else text
    if not digits.isdigit():
        return None
    return int(digits) * (unit or 1)


def read_cache_sizes(root="/sys/devices/system/cpu/cpu0/cache"):
    """(L1 data bytes, L2 bytes) of the core described under ``root``, each None where the
    directory does not say (the instruction cache is skipped: only data counts here)."""
    sizes = {}
    for index in sorted(glob.glob(os.path.join(root, "index*"))):
        try:
            fields = {}
            for name in ("level", "type", "size"):
                with open(os.path.join(index, name)) as f:
                    fields[name] = f.read().strip()
        except OSError:
            continue
        if fields["type"] == "Instruction":
            continue
        size = parse_size(fields["size"])
        if fields["level"] in ("1", "2") and size:
            sizes.setdefault(int(fields["level"]), size)
    return sizes.get(1), sizes.get(2)


def _host_sizes():
    l1d, l2 = read_cache_sizes()
    return l1d or FALLBACK_L1D, l2 or FALLBACK_L2


L1D_BYTES, L2_BYTES = _host_sizes()
