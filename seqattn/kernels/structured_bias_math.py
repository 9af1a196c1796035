"""Per-pair formulas of the structured attention biases, shared by the CPU and CUDA kernels.

Written once as plain Python; the CPU kernels compile them with ``njit(inline="always")`` and the
CUDA kernels with ``cuda.jit(device=True)``, so both devices evaluate the same expressions. They
contain no float literals and no rounding (each device rounds in its own float dtype: Numba's
float ``//`` is a slow library call on the CPU, and ``math.floor`` returns an int64), so float32
code never promotes to float64. They do not call each other (a compiled function can only call
compiled globals).

Legend: cell and inv_cell (B, 3, 3) with the lattice vectors as rows; images (B, I, 3).
"""
import math

# Periodicity of a distance bias: none, a cell whose lattice vectors lie along the coordinate axes
# (wrapping the fractional coordinates finds the minimum image), or any other cell (wrapping, then
# the nearest of the 27 neighbouring images).
NOT_PERIODIC, ORTHORHOMBIC, TRICLINIC = 0, 1, 2
# Where a pair bias gets its codes: no pair bias, a (Bc, N, M) array, a clipped offset p_j - p_i.
NO_PAIR, CODE_ARRAY, RELATIVE_OFFSET = 0, 1, 2


def fractional(rx, ry, rz, inv_cell, b):
    """Fractional coordinates f = r inv_cell of a displacement r."""
    return (rx * inv_cell[b, 0, 0] + ry * inv_cell[b, 1, 0] + rz * inv_cell[b, 2, 0],
            rx * inv_cell[b, 0, 1] + ry * inv_cell[b, 1, 1] + rz * inv_cell[b, 2, 1],
            rx * inv_cell[b, 0, 2] + ry * inv_cell[b, 1, 2] + rz * inv_cell[b, 2, 2])


def cartesian(fx, fy, fz, cell, b):
    """The displacement f cell of fractional coordinates f."""
    return (fx * cell[b, 0, 0] + fy * cell[b, 1, 0] + fz * cell[b, 2, 0],
            fx * cell[b, 0, 1] + fy * cell[b, 1, 1] + fz * cell[b, 2, 1],
            fx * cell[b, 0, 2] + fy * cell[b, 1, 2] + fz * cell[b, 2, 2])


def nearest_image(rx, ry, rz, images, b):
    """r + t for the lattice translation t in images[b] that makes it shortest (the first one
    on ties): the minimum image of a triclinic cell's wrapped displacement."""
    best_x, best_y, best_z = rx + images[b, 0, 0], ry + images[b, 0, 1], rz + images[b, 0, 2]
    best = best_x * best_x + best_y * best_y + best_z * best_z
    for t in range(1, images.shape[1]):
        tx, ty, tz = rx + images[b, t, 0], ry + images[b, t, 1], rz + images[b, t, 2]
        d2 = tx * tx + ty * ty + tz * tz
        if d2 < best:
            best, best_x, best_y, best_z = d2, tx, ty, tz
    return best_x, best_y, best_z


def table_coordinate(d, inv_step, last):
    """u = d / step, the distance in units of the table's spacing, clamped to the last entry
    C - 1 = ``last`` (the value is constant beyond r_max; NaN lands there too, so the index a
    caller derives from u is always valid). Entries floor(u) and floor(u) + 1 are interpolated,
    floor(u) taken at most C - 2."""
    u = d * inv_step
    if not u < last:
        u = last
    return u


def log_cosine_envelope(d, half_angle_per_distance, two):
    """log(0.5 (1 + cos(pi d / cutoff))) = 2 log |cos(a d)| with a = pi / (2 cutoff), d <= cutoff.

    The absolute value is for a pair at the cutoff itself: float32's a * cutoff rounds above
    pi / 2, where the cosine is about -4e-8 and its log NaN (on a GPU; the CUDA simulator and
    Python raise). |cos| there is the envelope a rounding error inside the cutoff: a weight
    of about 1e-15."""
    return two * math.log(abs(math.cos(half_angle_per_distance * d)))


def log_cosine_envelope_grad(d, half_angle_per_distance, two):
    """d/dd of :func:`log_cosine_envelope`: -2 a tan(a d)."""
    return -two * half_angle_per_distance * math.tan(half_angle_per_distance * d)
