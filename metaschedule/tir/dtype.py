"""Scalar data types of the IR, spelled as strings ("float32", "int64", ...)."""

from __future__ import annotations

import numpy as np

# name -> (numpy dtype, C type, bits)
_DTYPES: dict[str, tuple[str, str, int]] = {
    "bool": ("bool", "bool", 8),
    "int8": ("int8", "int8_t", 8),
    "int16": ("int16", "int16_t", 16),
    "int32": ("int32", "int32_t", 32),
    "int64": ("int64", "int64_t", 64),
    "uint8": ("uint8", "uint8_t", 8),
    "float16": ("float16", "_Float16", 16),
    "float32": ("float32", "float", 32),
    "float64": ("float64", "double", 64),
}

SUPPORTED_DTYPES: tuple[str, ...] = tuple(_DTYPES)


def check_dtype(dtype: object) -> str:
    """Return ``dtype`` as a canonical dtype string, or raise a ``TypeError`` naming the choices."""
    if isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
        dtype = np.dtype(dtype).name
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise TypeError(
            f"unsupported dtype {dtype!r}; expected one of: {', '.join(SUPPORTED_DTYPES)}"
        )
    return dtype


def is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def is_int(dtype: str) -> bool:
    """True for signed and unsigned integer types (not bool)."""
    return dtype.startswith("int") or dtype.startswith("uint")


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


def bits(dtype: str) -> int:
    return _DTYPES[check_dtype(dtype)][2]


def nbytes(dtype: str) -> int:
    return max(1, bits(dtype) // 8)


def numpy_dtype(dtype: str) -> np.dtype:
    return np.dtype(_DTYPES[check_dtype(dtype)][0])


def c_type(dtype: str) -> str:
    return _DTYPES[check_dtype(dtype)][1]
