"""GGUF files (zeptograd.nn.gguf_load): files written by the gguf package's GGUFWriter, checked against its
GGUFReader (metadata, shapes, raw plain data) and gguf.quants.dequantize (the block formats)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from zeptograd import Device, GlobalCounters, dtypes
from zeptograd.helpers import ArgumentError
from zeptograd.nn import gguf as gguf_module
from zeptograd.nn.state import gguf_load

gguf = pytest.importorskip("gguf")
Q = gguf.GGMLQuantizationType

# float16 fields (byte offsets in a block) that random bytes must not turn into inf or NaN
F16_FIELDS = {
    Q.Q4_0: (0,),
    Q.Q4_1: (0, 2),
    Q.Q5_0: (0,),
    Q.Q5_1: (0, 2),
    Q.Q8_0: (0,),
    Q.Q2_K: (80, 82),
    Q.Q3_K: (108,),
    Q.Q4_K: (0, 2),
    Q.Q5_K: (0, 2),
    Q.Q6_K: (208,),
}
QUANTIZED = (*F16_FIELDS, Q.Q8_K)
# the types gguf.quants.quantize makes from float data
QUANTIZABLE = (Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0)
PLAIN = {
    Q.F32: (np.float32, dtypes.float32),
    Q.F16: (np.float16, dtypes.float16),
    Q.F64: (np.float64, dtypes.float64),
    Q.I8: (np.int8, dtypes.int8),
    Q.I16: (np.int16, dtypes.int16),
    Q.I32: (np.int32, dtypes.int32),
    Q.I64: (np.int64, dtypes.int64),
}
# outer shapes (rows) and the blocks per row: 1-D, 2-D and 3-D, dims not all equal
SHAPES = [((3,), 2), ((2, 3), 1), ((1,), 1), ((2, 1), 3), ((), 2)]


def random_blocks(qtype: gguf.GGMLQuantizationType, rows: tuple[int, ...], nblocks: int, rng) -> np.ndarray:
    """Random block bytes of shape (*rows, nblocks * block_bytes): every quant bit pattern, with finite scales
    (normal and subnormal float16s of either sign)."""
    nbytes = gguf.GGML_QUANT_SIZES[qtype][1]
    raw = rng.integers(0, 256, size=(*rows, nblocks, nbytes), dtype=np.uint8)
    scales = rng.standard_normal((*rows, nblocks, 2))
    scales[rng.random(scales.shape) < 0.2] *= 1e-6  # some subnormal
    scales = scales.astype(np.float16)
    if qtype == Q.Q8_K:
        raw[..., 0:4] = rng.standard_normal((*rows, nblocks, 1)).astype("<f4").view(np.uint8)
    for i, at in enumerate(F16_FIELDS.get(qtype, ())):
        raw[..., at : at + 2] = scales[..., i : i + 1].view(np.uint8)
    return raw.reshape(*rows, nblocks * nbytes)


def dequantize_q8_k(raw: np.ndarray) -> np.ndarray:
    """Q8_K from ggml's block_q8_K (d: float32, qs: int8[256], bsums: int16[16]); the gguf package has no Q8_K."""
    blocks = raw.reshape(-1, 292)
    d = blocks[:, 0:4].copy().view("<f4")
    return (d * blocks[:, 4:260].view(np.int8).astype(np.float32)).reshape(*raw.shape[:-1], -1)


def write(path, tensors: dict, metadata: dict | None = None, alignment: int | None = None, **kw) -> None:
    """A GGUF file of `tensors` (name -> (array, raw_dtype or None)) and `metadata` (key -> (value, type))."""
    w = gguf.GGUFWriter(str(path), "test", **kw)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, (value, vtype) in (metadata or {}).items():
        w.add_key_value(key, value, vtype)
    for name, (array, raw_dtype) in tensors.items():
        w.add_tensor(name, array, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def reader_metadata(path) -> dict:
    """The reader's key/value table, less the header fields it lists as "GGUF.version" and so on."""
    fields = gguf.GGUFReader(str(path)).fields.items()
    return {name: field.contents() for name, field in fields if not name.startswith("GGUF.")}


V = gguf.GGUFValueType
METADATA = {
    "u8": (255, V.UINT8),
    "i8": (-128, V.INT8),
    "u16": (65535, V.UINT16),
    "i16": (-32768, V.INT16),
    "u32": (2**32 - 1, V.UINT32),
    "i32": (-(2**31), V.INT32),
    "f32": (0.1, V.FLOAT32),
    "bool.true": (True, V.BOOL),
    "bool.false": (False, V.BOOL),
    "str": ("héllo, wörld ✓", V.STRING),
    "str.empty": ("", V.STRING),
    "u64": (2**64 - 1, V.UINT64),
    "i64": (-(2**63), V.INT64),
    "f64": (-1e300, V.FLOAT64),
    "arr.i32": ([1, -2, 3], V.ARRAY),
    "arr.f32": ([0.5, -1.25, 3e-3], V.ARRAY),
    "arr.str": (["a", "", "ünï"], V.ARRAY),
    "arr.bool": ([True, False, True], V.ARRAY),
}


def test_metadata_every_value_type(tmp_path):
    path = tmp_path / "meta.gguf"
    write(path, {}, METADATA)
    metadata, tensors = gguf_load(path)
    expected = reader_metadata(path)
    assert tensors == {}
    assert set(metadata) == set(expected) and "general.architecture" in metadata
    for key, value in expected.items():
        assert metadata[key] == value, key
        assert type(metadata[key]) is type(value), key  # bool stays bool, ints stay ints
    assert metadata["f32"] == float(np.float32(0.1)) and metadata["u64"] == 2**64 - 1


def test_metadata_typed_and_nested_arrays(tmp_path):
    # arrays of each numeric type (the writer infers INT32/FLOAT32 from python values, so pack by hand) and an
    # array of arrays, which the reader's contents() flattens: checked against the values written
    path = tmp_path / "arrays.gguf"
    w = gguf.GGUFWriter(str(path), "test")
    numeric = {
        V.UINT8: [0, 255],
        V.INT8: [-128, 127],
        V.UINT16: [0, 65535],
        V.INT16: [-32768, 7],
        V.UINT32: [2**32 - 1],
        V.INT64: [-(2**63), 2**63 - 1],
        V.UINT64: [2**64 - 1, 0],
        V.FLOAT64: [1e-300, -2.5],
    }
    for vtype, values in numeric.items():
        w.add_key_value(f"arr.{vtype.name}", values, V.ARRAY, sub_type=vtype)
    w.add_array("arr.nested", [[1, 2], [3], ["x", "y"]])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    metadata, _ = gguf_load(path)
    expected = reader_metadata(path)
    for vtype, values in numeric.items():
        key = f"arr.{vtype.name}"
        assert metadata[key] == values == expected[key], key
        assert all(type(v) is type(e) for v, e in zip(metadata[key], values)), key
    assert metadata["arr.nested"] == [[1, 2], [3], ["x", "y"]]


@pytest.mark.parametrize("qtype", list(PLAIN), ids=lambda q: q.name)
def test_plain_types_exact(tmp_path, qtype):
    np_dtype, dtype = PLAIN[qtype]
    rng = np.random.default_rng(int(qtype))
    arrays = {}
    for i, shape in enumerate([(5,), (3, 4), (2, 3, 5)]):
        if np.issubdtype(np_dtype, np.integer):
            info = np.iinfo(np_dtype)
            a = rng.integers(info.min, info.max, size=shape, dtype=np_dtype, endpoint=True)
        else:
            a = (rng.standard_normal(shape) * 100).astype(np_dtype)
        arrays[f"t{i}"] = a
    path = tmp_path / f"{qtype.name}.gguf"
    write(path, {name: (a, None) for name, a in arrays.items()})
    _, tensors = gguf_load(path)
    for t in gguf.GGUFReader(str(path)).tensors:
        assert t.tensor_type == qtype
        out = tensors[t.name]
        assert out.dtype == dtype and out.shape == tuple(reversed(t.shape.tolist())) == arrays[t.name].shape
        np.testing.assert_array_equal(out.numpy(), t.data)


def test_bf16_exact(tmp_path):
    rng = np.random.default_rng(0)
    raw = (rng.standard_normal((3, 8)) * 10).astype(np.float32)
    path = tmp_path / "bf16.gguf"
    write(path, {"w": (gguf.quants.quantize(raw, Q.BF16), Q.BF16)})
    _, tensors = gguf_load(path)
    (t,) = gguf.GGUFReader(str(path)).tensors
    out = tensors["w"]
    assert out.dtype == dtypes.bfloat16 and out.shape == (3, 8)
    np.testing.assert_array_equal(out.float().numpy(), gguf.quants.dequantize(t.data, Q.BF16))


def test_empty_tensors(tmp_path):
    path = tmp_path / "empty.gguf"
    write(path, {"e": (np.zeros((0, 3), np.float32), None), "s": (np.zeros((2, 0, 4), np.float16), None)})
    _, tensors = gguf_load(path)
    for t in gguf.GGUFReader(str(path)).tensors:
        out = tensors[t.name]
        assert out.shape == t.data.shape and out.numpy().shape == t.data.shape
        assert out.dtype == (dtypes.float32 if t.name == "e" else dtypes.float16)


def check_quantized(path, expected_types) -> None:
    """Every tensor of the file against gguf.quants.dequantize of the reader's bytes: float32, the same shape,
    equal to within one float32 rounding of the larger term (a compiler may fuse x * d + m into one fma)."""
    _, tensors = gguf_load(path)
    reader = gguf.GGUFReader(str(path))
    assert {t.name for t in reader.tensors} == set(tensors)
    for t in reader.tensors:
        assert t.tensor_type == expected_types[t.name]
        ref = dequantize_q8_k(t.data) if t.tensor_type == Q.Q8_K else gguf.quants.dequantize(t.data, t.tensor_type)
        out = tensors[t.name]
        assert out.dtype == dtypes.float32
        assert out.shape == tuple(reversed(t.shape.tolist())) == ref.shape, t.name
        got = out.numpy()
        scale = np.abs(ref).max() if ref.size else 0.0
        np.testing.assert_allclose(got, ref, rtol=2**-23, atol=scale * 2**-23, err_msg=t.name)


@pytest.mark.parametrize("qtype", QUANTIZED, ids=lambda q: q.name)
def test_block_formats_random_bytes(tmp_path, qtype):
    rng = np.random.default_rng(int(qtype))
    tensors = {f"t{i}": (random_blocks(qtype, rows, nb, rng), qtype) for i, (rows, nb) in enumerate(SHAPES)}
    path = tmp_path / f"{qtype.name}.gguf"
    write(path, tensors)
    check_quantized(path, dict.fromkeys(tensors, qtype))


@pytest.mark.parametrize("qtype", QUANTIZABLE, ids=lambda q: q.name)
def test_block_formats_quantized_data(tmp_path, qtype):
    # real data through gguf's own quantizer: a (4, 96) matrix (3 blocks per row) and a (2, 3, 64) tensor
    rng = np.random.default_rng(7)
    data = {"m": rng.standard_normal((4, 96)).astype(np.float32), "c": rng.standard_normal((2, 3, 64)) * 5}
    path = tmp_path / f"q_{qtype.name}.gguf"
    write(path, {k: (gguf.quants.quantize(v.astype(np.float32), qtype), qtype) for k, v in data.items()})
    check_quantized(path, {"m": qtype, "c": qtype})
    _, tensors = gguf_load(path)
    assert tensors["m"].shape == (4, 96) and tensors["c"].shape == (2, 3, 64)
    # a 4- or 5-bit quantization is close to the data it came from: the layout is not scrambled
    err = np.abs(tensors["m"].numpy() - data["m"]).max()
    assert err < (0.05 if qtype == Q.Q8_0 else 0.6), err


def test_mixed_file_version_2_and_alignment(tmp_path):
    rng = np.random.default_rng(3)
    tensors = {
        "tok_embd.weight": (random_blocks(Q.Q6_K, (5,), 1, rng), Q.Q6_K),
        "norm.weight": (rng.standard_normal(7).astype(np.float32), None),
        "blk.0.ffn.weight": (random_blocks(Q.Q4_K, (3, 2), 2, rng), Q.Q4_K),
        "blk.0.attn_q.weight": (random_blocks(Q.Q8_0, (4,), 3, rng), Q.Q8_0),
        "half": (rng.standard_normal((2, 3)).astype(np.float16), None),
    }
    path = tmp_path / "mixed.gguf"
    write(path, tensors, {"name": ("mixed", V.STRING)}, alignment=64)
    metadata, loaded = gguf_load(path)
    assert metadata["general.alignment"] == 64 and metadata == reader_metadata(path)
    for t in gguf.GGUFReader(str(path)).tensors:
        if tensors[t.name][1] is None:
            np.testing.assert_array_equal(loaded[t.name].numpy(), t.data)
        else:
            ref = gguf.quants.dequantize(t.data, t.tensor_type)
            np.testing.assert_allclose(loaded[t.name].numpy(), ref, rtol=2**-23, atol=np.abs(ref).max() * 2**-23)
    # the same file as version 2: the layout is the same for a little-endian file
    raw = bytearray(path.read_bytes())
    assert raw[4:8] == struct.pack("<I", 3)
    raw[4:8] = struct.pack("<I", 2)
    path2 = tmp_path / "mixed_v2.gguf"
    path2.write_bytes(bytes(raw))
    metadata2, loaded2 = gguf_load(path2)
    assert metadata2 == metadata
    for name, t in loaded.items():
        np.testing.assert_array_equal(loaded2[name].numpy(), t.numpy())


def test_reads_only_each_tensors_bytes(tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    path = tmp_path / "two.gguf"
    a, b = random_blocks(Q.Q5_K, (2,), 2, rng), rng.standard_normal((3, 2)).astype(np.float32)
    write(path, {"a": (a, Q.Q5_K), "b": (b, None)}, alignment=128)
    reads = []
    original = gguf_module._file_bytes

    def spy(path, offset, nbytes, device):
        reads.append((offset, nbytes))
        return original(path, offset, nbytes, device)

    monkeypatch.setattr(gguf_module, "_file_bytes", spy)
    _, tensors = gguf_load(path)
    reader = gguf.GGUFReader(str(path))
    assert sorted(reads) == sorted((int(t.data_offset), int(t.n_bytes)) for t in reader.tensors)
    assert sum(n for _, n in reads) == a.nbytes + b.nbytes
    assert tensors["a"].shape == (2, 512) and tensors["b"].shape == (3, 2)


def test_dequantization_is_lazy_device_work(tmp_path):
    # loading runs no kernel; realizing a K-quant tensor runs its dequantization as one fused kernel
    rng = np.random.default_rng(9)
    path = tmp_path / "lazy.gguf"
    write(path, {"w": (random_blocks(Q.Q4_K, (4,), 2, rng), Q.Q4_K)})
    GlobalCounters.reset()
    _, tensors = gguf_load(path)
    assert GlobalCounters.kernel_count == 0
    tensors["w"].realize()
    assert GlobalCounters.kernel_count == 1


@pytest.mark.parametrize("device", ["PYTHON", "LLVM"])
def test_other_devices(tmp_path, device):
    if not Device.usable(device):
        pytest.skip(f"{device} is not usable here")
    rng = np.random.default_rng(11)
    tensors = {q.name: (random_blocks(q, (2,), 1, rng), q) for q in (Q.Q3_K, Q.Q5_0, Q.Q4_K, Q.Q6_K)}
    tensors["f16"] = (rng.standard_normal((2, 3)).astype(np.float16), None)
    path = tmp_path / "dev.gguf"
    write(path, tensors)
    _, loaded = gguf_load(path, device=device)
    for t in gguf.GGUFReader(str(path)).tensors:
        out = loaded[t.name]
        assert out.device == device
        if t.tensor_type == Q.F16:
            np.testing.assert_array_equal(out.numpy(), t.data)
        else:
            ref = gguf.quants.dequantize(t.data, t.tensor_type)
            np.testing.assert_allclose(out.numpy(), ref, rtol=2**-23, atol=np.abs(ref).max() * 2**-23)


# *** bad files ***


def small_file(tmp_path) -> tuple:
    path = tmp_path / "small.gguf"
    rng = np.random.default_rng(1)
    write(path, {"w": (random_blocks(Q.Q4_0, (2,), 2, rng), Q.Q4_0)}, {"k": ("v" * 40, V.STRING)})
    return path, path.read_bytes()


def test_bad_magic(tmp_path):
    path, raw = small_file(tmp_path)
    path.write_bytes(b"GGML" + raw[4:])
    with pytest.raises(ArgumentError, match=rf"gguf_load: {path} is not a GGUF file .*GGML"):
        gguf_load(path)
    path.write_bytes(b"")
    with pytest.raises(ArgumentError, match="is not a GGUF file"):
        gguf_load(path)


@pytest.mark.parametrize("keep", [6, 20, 40, 90])
def test_truncated_header(tmp_path, keep):
    path, raw = small_file(tmp_path)
    path.write_bytes(raw[:keep])
    with pytest.raises(ArgumentError, match=rf"gguf_load: {path} is truncated"):
        gguf_load(path)


def test_truncated_data(tmp_path):
    path, raw = small_file(tmp_path)
    (t,) = gguf.GGUFReader(str(path)).tensors
    end = int(t.data_offset) + int(t.n_bytes)  # the writer pads the file past the last tensor
    path.write_bytes(raw[: end - 1])
    with pytest.raises(ArgumentError, match=rf"gguf_load: {path} is truncated: tensor 'w' needs bytes"):
        gguf_load(path)


def test_bad_versions(tmp_path):
    path, raw = small_file(tmp_path)
    path.write_bytes(raw[:4] + struct.pack("<I", 1) + raw[8:])
    with pytest.raises(ArgumentError, match="GGUF version 1; supported versions: 2, 3"):
        gguf_load(path)
    big = tmp_path / "big.gguf"
    write(big, {"x": (np.ones(4, np.float32), None)}, endianess=gguf.GGUFEndian.BIG)
    with pytest.raises(ArgumentError, match="big-endian GGUF file"):
        gguf_load(big)


def test_duplicate_key(tmp_path):
    # the writer cannot write a key twice: write "k1" and "k2", then rename the second to "k1"
    path = tmp_path / "dup.gguf"
    write(path, {}, {"k1": (1, V.UINT8), "k2": (2, V.UINT8)})
    raw = path.read_bytes()
    assert raw.count(b"k2") == 1
    path.write_bytes(raw.replace(b"k2", b"k1"))
    with pytest.raises(ArgumentError, match=rf"gguf_load: {path} has the metadata key 'k1' twice"):
        gguf_load(path)


def test_unsupported_type_refused_by_name(tmp_path):
    path = tmp_path / "iq.gguf"
    nbytes = gguf.GGML_QUANT_SIZES[Q.IQ4_NL][1]
    write(path, {"w": (np.zeros((2, 2 * nbytes), np.uint8), Q.IQ4_NL)})
    with pytest.raises(ArgumentError, match=r"tensor 'w' in .* has GGML type IQ4_NL, which is not supported"):
        gguf_load(path)


def gguf_string(text: str) -> bytes:
    return struct.pack("<Q", len(text)) + text.encode()


@pytest.mark.parametrize(
    "entry, message",
    [
        (struct.pack("<IIQ", 9, 4, 2**40), r"metadata 'k' is an array of 1099511627776 elements of type UINT32"),
        (struct.pack("<IIQ", 9, 8, 2**61), r"metadata 'k' is an array of 2305843009213693952 elements of type STR"),
        (struct.pack("<IQ", 8, 2**50), r"is truncated: metadata 'k' needs 1125899906842624 bytes"),
        (struct.pack("<II", 13, 0), r"metadata 'k' has an unknown value type 13"),
        (struct.pack("<IIQ", 9, 13, 1), r"metadata 'k' is an array of an unknown value type 13"),
    ],
)
def test_corrupt_metadata(tmp_path, entry, message):
    # hand-made: one metadata entry "k" whose type or count is wrong, and a few bytes after it
    path = tmp_path / "corrupt.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("k") + entry + bytes(64))
    with pytest.raises(ArgumentError, match=f"gguf_load: {path}.*{message}"):
        gguf_load(path)


def test_row_not_whole_blocks(tmp_path):
    # ggml never writes this; hand-made: a Q8_0 tensor whose innermost dim (48) is not a multiple of 32
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + gguf_string("w") + struct.pack("<IQQIQ", 2, 48, 2, 8, 0)
    path = tmp_path / "rows.gguf"
    path.write_bytes(head + bytes(-len(head) % 32) + bytes(34 * 3))
    with pytest.raises(ArgumentError, match=r"innermost dim \(48\) must be a multiple of the block size 32"):
        gguf_load(path)


def test_bad_arguments(tmp_path):
    with pytest.raises(FileNotFoundError, match="gguf_load: no such file"):
        gguf_load(tmp_path / "missing.gguf")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        gguf_load(tmp_path)
    with pytest.raises(TypeError, match="path must be a str or os.PathLike"):
        gguf_load(3)  # type: ignore[arg-type]
