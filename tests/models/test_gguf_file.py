"""The GGUF header reader against gguf's own writer and reader (GGUFWriter, GGUFReader): every field,
every tensor's bytes and type, on a small file here and (extended) on SmolLM2's whole file."""

from __future__ import annotations

import io

import gguf
import numpy as np
import pytest
from gguf.quants import dequantize, quantize

from attention_course.models.gguf_file import read_header, tensor_bytes


def _written(tmp_path, alignment=None):
    """A small GGUF file written by gguf's own writer: scalars, strings, arrays, float and quantized tensors."""
    path = tmp_path / "small.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    if alignment:
        w.add_custom_alignment(alignment)
    w.add_uint32("t.u32", 7)
    w.add_float32("t.eps", 1e-5)
    w.add_bool("t.flag", True)
    w.add_int64("t.i64", -3)
    w.add_string("t.name", "héllo")
    w.add_array("t.words", ["a", "bc", "Ġthe"])
    w.add_array("t.ints", [1, 2, 3])
    rng = np.random.default_rng(0)
    plain = rng.standard_normal((3, 5)).astype(np.float32)
    q = rng.standard_normal((4, 64)).astype(np.float32)
    w.add_tensor("plain", plain)
    w.add_tensor("quant", quantize(q, gguf.GGMLQuantizationType.Q8_0), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("half", plain.astype(np.float16))
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file()
    w.close()
    return path


def _compare(path):
    reader = gguf.GGUFReader(str(path))
    with open(path, "rb") as f:
        fields, infos, start = read_header(f)
    theirs = {k: reader.fields[k].contents() for k in reader.fields if not k.startswith("GGUF.")}
    assert fields.keys() == theirs.keys()
    for key, value in theirs.items():
        assert fields[key] == value and type(fields[key]) is type(value), key
    data = np.memmap(path, dtype=np.uint8, mode="r")
    assert [i.name for i in infos] == [t.name for t in reader.tensors]
    for info, t in zip(infos, reader.tensors):
        raw, kind = tensor_bytes(data, info, start)
        assert kind == t.tensor_type and raw.dtype == t.data.dtype and raw.shape == t.data.shape, info.name
        np.testing.assert_array_equal(raw, t.data)
    return fields, infos, data, start


@pytest.mark.parametrize("alignment", [None, 64])
def test_every_field_and_tensor_is_ggufs_own(tmp_path, alignment):
    fields, infos, data, start = _compare(_written(tmp_path, alignment))
    assert fields["t.eps"] == float(np.float32(1e-5)) and fields["t.words"] == ["a", "bc", "Ġthe"]
    assert start % (alignment or 32) == 0
    quant = {i.name: i for i in infos}["quant"]
    raw, kind = tensor_bytes(data, quant, start)
    assert dequantize(raw, kind).shape == (4, 64)


def test_not_a_gguf_file_is_named():
    with pytest.raises(ValueError, match=r"not a GGUF file: it starts with b'PK\\x03\\x04'"):
        read_header(io.BytesIO(b"PK\x03\x04" + bytes(20)))


@pytest.mark.extended
def test_smollm2s_file_reads_as_ggufs_reader_reads_it():
    from attention_course.models.smollm2 import locate_smollm2

    fields, infos, _, _ = _compare(locate_smollm2())
    assert len(infos) == 272 and len(fields["tokenizer.ggml.tokens"]) == 49152
