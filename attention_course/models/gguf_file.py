r"""Read a GGUF file's header in one pass: its key/value fields and where each tensor's bytes are.

A GGUF file (llama.cpp's format, version 3) is a header followed by the tensors' data:

.. code-block:: text

    "GGUF"  version:u32  n_tensors:u64  n_fields:u64
    n_fields  x  key:string  type:u32  value           (a string is u64 length + UTF-8 bytes;
                                                       an array is type:u32 count:u64 items)
    n_tensors x  name:string  n_dims:u32  dims:u64[n_dims]  ggml_type:u32  offset:u64
    padding to general.alignment (32), then the tensors' data, each at its offset

:func:`read_header` reads what ``gguf.GGUFReader`` reads, in well under a second instead of
seconds; :func:`tensor_bytes` hands each tensor to ``gguf.quants.dequantize`` as it does.

Examples
--------
>>> import io, struct
>>> def string(s): return struct.pack("<Q", len(s)) + s.encode()
>>> raw = (b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + string("general.name") + struct.pack("<I", 8)
...        + string("tiny") + string("n.list") + struct.pack("<IIQ", 9, 4, 3) + struct.pack("<3I", 1, 2, 3))
>>> read_header(io.BytesIO(raw))
({'general.name': 'tiny', 'n.list': [1, 2, 3]}, [], 128)
"""

from __future__ import annotations

import struct
from typing import Any, BinaryIO, NamedTuple

import numpy as np

__all__ = ["TensorInfo", "read_header", "tensor_bytes"]

# GGUF value type -> struct format of one scalar (8 = string and 9 = array are read apart)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class TensorInfo(NamedTuple):
    """One tensor's entry in the header: ``dims`` in ggml's order (the fastest-varying first)."""

    name: str
    dims: tuple[int, ...]
    ggml_type: int
    offset: int  # from the start of the data section


class _Reader:
    def __init__(self, f: BinaryIO):
        self.f = f

    def unpack(self, fmt: str) -> tuple:
        return struct.unpack("<" + fmt, self.f.read(struct.calcsize("<" + fmt)))

    def string(self) -> str:
        (n,) = self.unpack("Q")
        return self.f.read(n).decode("utf-8")

    def value(self, kind: int) -> Any:
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item_kind, count = self.unpack("IQ")
            if item_kind in _SCALARS:  # one read for the whole array
                return list(self.unpack(f"{count}{_SCALARS[item_kind]}"))
            return [self.value(item_kind) for _ in range(count)]
        if kind not in _SCALARS:
            raise ValueError(f"GGUF value type {kind} is not one of the format's 13 types")
        return self.unpack(_SCALARS[kind])[0]


def read_header(f: BinaryIO) -> tuple[dict[str, Any], list[TensorInfo], int]:
    """Read a GGUF header from an open binary file.

    Returns
    -------
    fields : dict
        Every key/value field: numbers as Python ``int``/``float``/``bool``, strings as ``str``,
        arrays as lists.
    tensors : list of TensorInfo
        In the file's order.
    data_start : int
        The file position where the tensors' data begins (the header's end, aligned).
    """
    r = _Reader(f)
    magic = f.read(4)
    if magic != b"GGUF":
        raise ValueError(f"not a GGUF file: it starts with {magic!r}, not b'GGUF'")
    version, n_tensors, n_fields = r.unpack("IQQ")
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version} is not supported (2 or 3)")
    fields = {}
    for _ in range(n_fields):
        key = r.string()
        (kind,) = r.unpack("I")
        fields[key] = r.value(kind)
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        (n_dims,) = r.unpack("I")
        dims = r.unpack(f"{n_dims}Q")
        ggml_type, offset = r.unpack("IQ")
        tensors.append(TensorInfo(name, tuple(dims), ggml_type, offset))
    alignment = int(fields.get("general.alignment", 32))
    data_start = -(-f.tell() // alignment) * alignment
    return fields, tensors, data_start


def tensor_bytes(data: np.ndarray, info: TensorInfo, data_start: int) -> tuple[np.ndarray, Any]:
    """One tensor's stored values, shaped as ``gguf.quants.dequantize`` expects, and its type.

    ``data`` is the whole file as ``uint8``. Float or integer values come in numpy's order (the
    reverse of ``info.dims``); quantized ones as ``uint8`` blocks (..., bytes per row).
    """
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf.quants import quant_shape_to_byte_shape

    kind = GGMLQuantizationType(info.ggml_type)
    shape = tuple(reversed(info.dims))  # (rows, columns): numpy's order
    block, type_size = GGML_QUANT_SIZES[kind]
    n_bytes = int(np.prod(info.dims)) * type_size // block
    start = data_start + info.offset
    raw = data[start:start + n_bytes]  # (n_bytes,) uint8
    plain = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I8": np.int8,
             "I16": np.int16, "I32": np.int32, "I64": np.int64}
    if kind.name in plain:
        return raw.view(plain[kind.name]).reshape(shape), kind
    return raw.reshape(quant_shape_to_byte_shape(shape, kind)), kind  # (..., bytes per row)
