"""Lets the grader call your functions with NumPy arrays. Keep the import; do not edit.

The grader sends arrays across processes as tensors (plain data); this helper
turns them back into NumPy arrays, and ``{"rng_seed": s}`` into
``np.random.default_rng(s)``, before calling your function; a NumPy scalar
result goes back as a plain Python number.
"""

import numpy as np


def call_with_arrays(func, *args):
    """``func(*args)`` with array-likes converted by ``np.asarray`` (NumPy only)."""
    converted = []
    for a in args:
        if isinstance(a, dict) and set(a) == {"rng_seed"}:
            converted.append(np.random.default_rng(int(a["rng_seed"])))
        elif hasattr(a, "__array__") and not isinstance(a, np.ndarray):
            converted.append(np.asarray(a))
        else:
            converted.append(a)
    result = func(*converted)
    return result.item() if isinstance(result, np.generic) else result
