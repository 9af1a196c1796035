"""Intel AMX tile instructions for Numba kernels: eight tile registers of 16 rows x 64 bytes, and
TDPBF16PS, which adds the product of a 16 x 32 bf16 tile and a 32 x 16 bf16 tile (in VNNI pairs)
to a 16 x 16 float32 tile. Sapphire Rapids and later Xeons have it; one TDPBF16PS takes 16 cycles
and does 16 x 16 x 32 multiply-adds, 16 times the float32 FMA rate of AVX-512.

Each intrinsic names its tiles by number (compile-time literals), as the instructions do. A
kernel first loads a tile configuration (:func:`tile_config`, every tile 16 x 64 bytes) and
releases the tiles when done (:func:`tile_release`), on the thread that uses them.

Linux lets a process use the tiles only after it asks (arch_prctl ARCH_REQ_XCOMP_PERM, since 5.16:
the tiles add 8 KiB to each thread's saved state); :data:`AMX_BF16` is true only where the CPU
that Numba compiles for has AMX-TILE and AMX-BF16 and the kernel granted the request."""
import ctypes
import sys

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ..llvm_vectors import TARGET_FEATURES

TILE_ROWS = 16
TILE_BYTES_PER_ROW = 64
TILE_ELEMENTS = TILE_ROWS * TILE_BYTES_PER_ROW // 2  # bf16 values in a tile
_ARCH_PRCTL = 158  # the x86-64 syscall number
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18

_I8 = ir.IntType(8)
_I64 = ir.IntType(64)
_BYTES = _I8.as_pointer()


def has_amx_bf16(cpu_features):
    """Whether ``cpu_features`` (as LLVM writes them) include AMX tiles with bf16 products."""
    features = cpu_features.split(",")
    return "+amx-tile" in features and "+amx-bf16" in features


def _tiles_permitted():
    """Ask Linux for the tile state (once per process; granted for all its threads)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0
    except (OSError, AttributeError):
        return False


AMX_BF16 = has_amx_bf16(TARGET_FEATURES) and _tiles_permitted()


def tile_configuration():
    """The 64-byte configuration that :func:`tile_config` loads: palette 1, all eight tiles
    16 rows x 64 bytes."""
    config = np.zeros(64, np.uint8)
    config[0] = 1
    config[16:32].view(np.uint16)[:8] = TILE_BYTES_PER_ROW
    config[48:56] = TILE_ROWS
    return config


def _declare(module, name, args):
    return cgutils.get_or_insert_function(module, ir.FunctionType(ir.VoidType(), args), name)


def _tile_number(literal):
    return ir.Constant(_I8, literal.literal_value)


def _address(context, builder, array_type, array, offset):
    """The byte address of element ``offset`` of the array (counted from its first element)."""
    data = context.make_array(array_type)(context, builder, array).data
    return builder.bitcast(builder.gep(data, [offset]), _BYTES)


def _tile_numbers(*numbers):
    return all(isinstance(n, types.IntegerLiteral) for n in numbers)


@intrinsic(prefer_literal=True)
def tile_load(typingctx, tile, array, offset, row_bytes):
    """Load tile ``tile`` with 16 rows of 64 bytes, from element ``offset`` of array, rows
    ``row_bytes`` apart."""
    if not _tile_numbers(tile):
        return None

    def codegen(context, builder, signature, args):
        address = _address(context, builder, signature.args[1], args[1], args[2])
        load = _declare(builder.module, "llvm.x86.tileloadd64", [_I8, _BYTES, _I64])
        builder.call(load, [_tile_number(signature.args[0]), address, args[3]])
        return context.get_dummy_value()

    return types.void(tile, array, types.intp, types.intp), codegen


@intrinsic(prefer_literal=True)
def tile_store(typingctx, tile, array, offset, row_bytes):
    """Store tile ``tile`` to element ``offset`` of array, rows ``row_bytes`` apart."""
    if not _tile_numbers(tile):
        return None

    def codegen(context, builder, signature, args):
        address = _address(context, builder, signature.args[1], args[1], args[2])
        store = _declare(builder.module, "llvm.x86.tilestored64", [_I8, _BYTES, _I64])
        builder.call(store, [_tile_number(signature.args[0]), address, args[3]])
        return context.get_dummy_value()

    return types.void(tile, array, types.intp, types.intp), codegen


@intrinsic(prefer_literal=True)
def tile_dot_bf16(typingctx, c, a, b):
    """Tile c (16 x 16 float32) += tile a (16 x 32 bf16) @ tile b (32 x 16 bf16, stored as 16
    rows of 16 pairs: row r holds rows 2r and 2r + 1 of b, interleaved)."""
    if not _tile_numbers(c, a, b):
        return None

    def codegen(context, builder, signature, args):
        dot = _declare(builder.module, "llvm.x86.tdpbf16ps", [_I8, _I8, _I8])
        builder.call(dot, [_tile_number(t) for t in signature.args])
        return context.get_dummy_value()

    return types.void(c, a, b), codegen


@intrinsic(prefer_literal=True)
def tile_zero(typingctx, tile):
    """Set every byte of tile ``tile`` to zero."""
    if not _tile_numbers(tile):
        return None

    def codegen(context, builder, signature, args):
        zero = _declare(builder.module, "llvm.x86.tilezero", [_I8])
        builder.call(zero, [_tile_number(signature.args[0])])
        return context.get_dummy_value()

    return types.void(tile), codegen


@intrinsic
def tile_config(typingctx, config):
    """Load the tile configuration in ``config`` (:func:`tile_configuration`)."""
    def codegen(context, builder, signature, args):
        address = _address(context, builder, signature.args[0], args[0], ir.Constant(_I64, 0))
        builder.call(_declare(builder.module, "llvm.x86.ldtilecfg", [_BYTES]), [address])
        return context.get_dummy_value()

    return types.void(config), codegen


@intrinsic
def tile_release(typingctx):
    """Return the tiles to their initial state (no tile state to save on a context switch)."""
    def codegen(context, builder, signature, args):
        builder.call(_declare(builder.module, "llvm.x86.tilerelease", []), [])
        return context.get_dummy_value()

    return types.void(), codegen
