"""The host CPU's cache sizes, read once from Linux's sysfs: the CPU kernels size their tiles
by them where a measurement showed that the best size follows the cache (attention.py)."""
import os

CACHE_DIR = "/sys/devices/system/cpu/cpu0/cache"


def _size_in_bytes(text):
    """'2048K' -> 2097152; '1M' -> 1048576; '512' -> 512."""
    text = text.strip().upper()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def cache_bytes(level, cache_dir=CACHE_DIR):
    """Bytes of the data (or unified) cache of ``level`` that one core of the host has; 0 where
    sysfs does not say (another OS, a container that hides it): callers then keep the sizes
    that suit the smallest caches measured."""
    try:
        entries = sorted(os.listdir(cache_dir))
    except OSError:
        return 0
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            with open(os.path.join(cache_dir, entry, "level")) as f:
                entry_level = int(f.read())
            with open(os.path.join(cache_dir, entry, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(cache_dir, entry, "size")) as f:
                size = _size_in_bytes(f.read())
        except (OSError, ValueError):
            continue
        if entry_level == level and kind in ("Data", "Unified"):
            return size
    return 0


L2_BYTES = cache_bytes(2)
