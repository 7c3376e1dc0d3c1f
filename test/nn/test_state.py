"""Model state (zeptograd.nn.state): state dicts, loading (all-or-nothing), safetensors files, and the
interchange with torch's safetensors reader and writer."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from collections import OrderedDict, namedtuple

import numpy as np
import pytest

from zeptograd import Tensor, dtypes
from zeptograd.nn.state import (
    LoadResult,
    get_parameters,
    get_state_dict,
    load_state_dict,
    safe_load,
    safe_load_metadata,
    safe_save,
)

Pair = namedtuple("Pair", ["left", "right"])


class Block:
    def __init__(self, n: int):
        self.weight = Tensor(np.arange(n * 2, dtype=np.float32).reshape(n, 2))
        self.bias = Tensor(np.zeros(n, np.float32))
        self.name, self.size, self.scale, self.nothing = "block", n, 0.5, None


class Model:
    def __init__(self):
        self.layers = [Block(2), Block(3)]
        self.heads = {"a": Tensor(np.ones(2, np.float32)), "b": (Tensor(np.ones(1, np.float32)),)}
        self.pair = Pair(Tensor(np.zeros(1, np.float32)), Tensor(np.ones(1, np.float32)))
        self.table = np.ones(3)  # a numpy array is not model state
        self.fn = np.sum
        self.cls = Block


def _values(model) -> dict[str, list]:
    return {k: v.tolist() for k, v in get_state_dict(model).items()}


# *** get_state_dict / get_parameters ***


def test_get_state_dict_names():
    names = list(get_state_dict(Model()))
    assert names == [
        "layers.0.weight",
        "layers.0.bias",
        "layers.1.weight",
        "layers.1.bias",
        "heads.a",
        "heads.b.0",
        "pair.left",
        "pair.right",
    ]
    assert list(get_state_dict(Block(1), prefix="enc.")) == ["enc.weight", "enc.bias"]
    assert list(get_state_dict(OrderedDict(x=Tensor([1.0]), y=[Tensor([2.0])]))) == ["x", "y.0"]
    t = Tensor([1.0])
    assert get_state_dict(t, prefix="w") == {"w": t}


def test_get_state_dict_tied_and_cycles():
    m = Model()
    m.tied = m.layers[0].weight  # one tensor, two names
    m.layers[1].parent = m  # a back reference is not followed
    sd = get_state_dict(m)
    assert sd["tied"] is sd["layers.0.weight"]
    assert not any(k.startswith("layers.1.parent") for k in sd)
    params = get_parameters(m)
    assert len(params) == len(sd) - 1 and len({id(p) for p in params}) == len(params)
    assert params[0] is m.layers[0].weight


@pytest.mark.no_roundtrip  # the layers' random init is a big graph
def test_get_state_dict_of_zeptograd_layers_matches_torch_names():
    torch = pytest.importorskip("torch")
    nn = pytest.importorskip("zeptograd.nn")
    if not hasattr(nn, "Linear"):
        pytest.skip("zeptograd.nn.Linear is not there yet")

    class Net:
        def __init__(self):
            self.layers = [nn.Linear(3, 4), nn.Linear(4, 2)]

    class TorchNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)])

    assert list(get_state_dict(Net())) == list(TorchNet().state_dict())


# *** load_state_dict ***


def test_load_state_dict_casts_and_moves():
    m = Block(2)
    m.half = Tensor(np.zeros(2, np.float16))
    sd = {
        "weight": Tensor(np.array([[1, 2], [3, 4]], np.int64)),  # cast to float32
        "bias": np.array([0.5, -0.5]),  # numpy float64: cast
        "half": Tensor([1.0, 2.5], device="PYTHON"),  # moved to CPU and cast to float16
    }
    assert load_state_dict(m, sd) == LoadResult([], [])
    assert m.weight.dtype is dtypes.float32 and m.weight.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert m.bias.tolist() == [0.5, -0.5]
    assert m.half.dtype is dtypes.float16 and m.half.device == "CPU" and m.half.tolist() == [1.0, 2.5]


def test_load_own_state_dict_and_verbose(capsys):
    m = Model()
    before = _values(m)
    load_state_dict(m, get_state_dict(m), verbose=True)
    assert _values(m) == before
    out = capsys.readouterr().out
    assert "layers.1.weight (3, 2) float32" in out and out.count("\n") == len(before)


def test_load_state_dict_non_strict():
    m = Block(2)
    result = load_state_dict(m, {"bias": Tensor([7.0, 8.0]), "extra": Tensor([1.0])}, strict=False)
    assert result == LoadResult(missing_keys=["weight"], unexpected_keys=["extra"])
    assert m.bias.tolist() == [7.0, 8.0] and m.weight.tolist() == [[0.0, 1.0], [2.0, 3.0]]


@pytest.mark.parametrize(
    "sd, strict, exc, match",
    [
        ({"weight": np.zeros((2, 2))}, True, RuntimeError, r"missing keys \['bias'\]"),
        (
            {"weight": np.zeros((2, 2)), "bias": np.zeros(2), "extra": np.zeros(1), "more": np.zeros(1)},
            True,
            RuntimeError,
            r"unexpected keys \['extra', 'more'\]",
        ),
        (
            {"weight": np.zeros((2, 3)), "bias": np.zeros(2)},
            True,
            RuntimeError,
            r"shape mismatches \(weight: the model has \(2, 2\), the state dict \(2, 3\)\)",
        ),
        ({"weight": np.zeros((2, 2)), "bias": np.zeros(3)}, False, RuntimeError, r"bias: the model has \(2,\)"),
        ({"weight": [[0.0, 0.0], [0.0, 0.0]], "bias": np.zeros(2)}, True, TypeError, r"weight is a list"),
        ({"weight": np.zeros((2, 2)), "bias": np.zeros(2, np.complex64)}, True, TypeError, r"bias: .*complex64"),
        ({"bias": np.zeros(3), "x": np.zeros(1)}, True, RuntimeError, r"missing keys.*unexpected keys.*mismatches"),
        ([np.zeros(2)], True, TypeError, r"load_state_dict: state_dict must be a dict of tensors, got list"),
    ],
)
def test_load_state_dict_errors_leave_model_untouched(sd, strict, exc, match):
    m = Block(2)
    before = _values(m)
    with pytest.raises(exc, match=match):
        load_state_dict(m, sd, strict=strict)
    assert _values(m) == before


def test_load_state_dict_from_torch_file(tmp_path):
    """A torch model's state_dict saved with safetensors.torch loads into a zeptograd model with the same
    structure; the forward passes then agree."""
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    torch.manual_seed(0)
    ref = torch.nn.ModuleDict({"fc1": torch.nn.Linear(3, 4), "fc2": torch.nn.Linear(4, 2)})
    path = tmp_path / "torch_model.safetensors"
    st_torch.save_file(ref.state_dict(), str(path))

    class Net:
        def __init__(self):
            self.fc1 = {"weight": Tensor.zeros(4, 3).contiguous(), "bias": Tensor.zeros(4).contiguous()}
            self.fc2 = {"weight": Tensor.zeros(2, 4).contiguous(), "bias": Tensor.zeros(2).contiguous()}

        def __call__(self, x: Tensor) -> Tensor:
            h = x.linear(self.fc1["weight"].T, self.fc1["bias"]).relu()
            return h.linear(self.fc2["weight"].T, self.fc2["bias"])

    net = Net()
    load_state_dict(net, safe_load(path))
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    with torch.no_grad():
        expected = ref["fc2"](ref["fc1"](torch.tensor(x)).relu()).numpy()
    np.testing.assert_allclose(net(Tensor(x)).numpy(), expected, rtol=1e-5, atol=1e-6)


# *** safetensors files ***

ROUND_TRIP = {
    "f32": np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32),
    "f16": np.array([[1.5, -2.25], [65504.0, 6e-8]], np.float16),
    "f64": np.array([1e-300, np.pi]),
    "i32": np.array([-(2**31), 2**31 - 1, 0], np.int32),
    "i64": np.array([-(2**63), 2**40], np.int64),
    "bool": np.array([[True, False, True]]),
    "u8": np.arange(250, 256, dtype=np.uint8),
    "i8": np.array([-128, 127], np.int8),
    "u16": np.array([65535], np.uint16),
    "u32": np.array([2**32 - 1], np.uint32),
    "u64": np.array([2**64 - 1], np.uint64),
    "i16": np.array([-32768], np.int16),
    "scalar": np.array(3.5, np.float32),
    "scalar_int": np.array(-7, np.int64),
    "empty": np.zeros((0,), np.float32),
    "empty_2d": np.zeros((2, 0, 3), np.int32),
}


def test_round_trip(tmp_path):
    path = tmp_path / "rt.safetensors"
    tensors = {k: Tensor(v) for k, v in ROUND_TRIP.items()}
    tensors["lazy_view"] = Tensor(ROUND_TRIP["f32"]).permute(2, 0, 1)[1:] * 2  # realized and made contiguous
    safe_save(tensors, path, metadata={"format": "zeptograd", "epoch": "3"})
    loaded = safe_load(str(path))
    assert sorted(loaded) == sorted(tensors)
    for key, t in tensors.items():
        expected = ROUND_TRIP[key] if key in ROUND_TRIP else ROUND_TRIP["f32"].transpose(2, 0, 1)[1:] * 2
        assert loaded[key].dtype is t.dtype and loaded[key].shape == expected.shape, key
        np.testing.assert_array_equal(loaded[key].numpy(), expected)
    assert safe_load_metadata(path) == {"format": "zeptograd", "epoch": "3"}


def test_a_file_without_tensors(tmp_path):
    path = tmp_path / "none.safetensors"
    safe_save({}, path, metadata={"k": "v"})
    assert safe_load(path) == {} and safe_load(path, device="disk") == {} and safe_load_metadata(path) == {"k": "v"}


def test_load_to_device_and_no_metadata(tmp_path):
    path = tmp_path / "d.safetensors"
    safe_save({"x": Tensor([1.0, 2.0])}, path)
    assert safe_load_metadata(path) == {}
    x = safe_load(path, device="PYTHON")["x"]
    assert x.device == "PYTHON" and x.tolist() == [1.0, 2.0]


def test_zeptograd_file_loads_in_torch(tmp_path):
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    path = tmp_path / "z.safetensors"
    safe_save({k: Tensor(v) for k, v in ROUND_TRIP.items() if k not in ("u16", "u32", "u64")}, path)
    loaded = st_torch.load_file(str(path))
    assert sorted(loaded) == sorted(k for k in ROUND_TRIP if k not in ("u16", "u32", "u64"))
    for key, value in loaded.items():
        assert value.dtype == getattr(torch, str(ROUND_TRIP[key].dtype)), key
        np.testing.assert_array_equal(value.numpy(), ROUND_TRIP[key])


def test_torch_file_loads_in_zeptograd(tmp_path):
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    path = tmp_path / "t.safetensors"
    torch.manual_seed(0)
    ref = {
        "w": torch.randn(3, 4),
        "h": torch.randn(5).half(),
        "i": torch.arange(-3, 3, dtype=torch.int64),
        "b": torch.tensor([True, False]),
        "u": torch.tensor([0, 255], dtype=torch.uint8),
        "s": torch.tensor(2.5, dtype=torch.float64),
        "e": torch.zeros(0, 2, dtype=torch.int32),
    }
    st_torch.save_file(ref, str(path), metadata={"by": "torch"})
    loaded = safe_load(path)
    assert sorted(loaded) == sorted(ref) and safe_load_metadata(path) == {"by": "torch"}
    for key, value in ref.items():
        assert loaded[key].dtype.name == str(value.dtype).removeprefix("torch."), key
        np.testing.assert_array_equal(loaded[key].numpy(), value.numpy())


def test_narrow_float_files_load(tmp_path):
    """bfloat16 and both fp8 formats written by torch's safetensors writer load with their values (torch's
    float32 conversion is the oracle), and zeptograd's writer writes them back in the same bits."""
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    path = tmp_path / "narrow.safetensors"
    values = torch.tensor([[1.0, -2.5, 3.140625], [1e-3, 200.0, -0.0]])
    ref = {"bf16": values.bfloat16(), "e4m3": values.to(torch.float8_e4m3fn), "e5m2": values.to(torch.float8_e5m2)}
    st_torch.save_file(ref, str(path))
    for device in (None, "disk"):
        loaded = safe_load(path, device=device)
        assert {k: t.dtype for k, t in loaded.items()} == {
            "bf16": dtypes.bfloat16,
            "e4m3": dtypes.fp8e4m3,
            "e5m2": dtypes.fp8e5m2,
        }
        for key, value in ref.items():
            np.testing.assert_array_equal(loaded[key].numpy(), value.float().numpy(), err_msg=key)
    again = tmp_path / "again.safetensors"
    safe_save(safe_load(path), again)
    back = st_torch.load_file(str(again))
    for key, value in ref.items():
        assert back[key].dtype == value.dtype and torch.equal(back[key].view(torch.uint8), value.view(torch.uint8))


def test_unknown_dtype_is_a_clear_error(tmp_path):
    header = b'{"w":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}}'
    path = tmp_path / "c64.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + bytes(8))
    with pytest.raises(TypeError, match=r"safe_load: 'w' in .*c64.safetensors has dtype C64"):
        safe_load(path)


def _bad_files(tmp_path) -> dict[str, bytes]:
    good = tmp_path / "good.safetensors"
    safe_save({"a": Tensor(np.arange(64, dtype=np.float32)), "b": Tensor([1, 2, 3])}, good)
    raw = good.read_bytes()
    header = b'{"a": not json}'

    def file(text: bytes, data: bytes = bytes(8)) -> bytes:
        return len(text).to_bytes(8, "little") + text + data

    return {
        "outside": file(b'{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}'),
        "wrong_size": file(b'{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}'),
        "not_an_object": file(b"[1, 2]"),
        "no_offsets": file(b'{"a":{"dtype":"F32","shape":[2]}}'),
        "negative_shape": file(b'{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}'),
        "truncated_data": raw[:-20],
        "truncated_header": raw[:30],
        "text": b"this is a plain text file, not a safetensors file at all\n" * 3,
        "empty": b"",
        "bad_json": len(header).to_bytes(8, "little") + header,
    }


@pytest.mark.parametrize(
    "kind",
    [
        "truncated_data",
        "truncated_header",
        "text",
        "empty",
        "bad_json",
        "outside",
        "wrong_size",
        "not_an_object",
        "no_offsets",
        "negative_shape",
    ],
)
def test_bad_files(tmp_path, kind: str):
    path = tmp_path / f"{kind}.safetensors"
    path.write_bytes(_bad_files(tmp_path)[kind])
    pattern = rf"{kind}.safetensors is not a valid safetensors file"
    with pytest.raises(ValueError, match=f"safe_load: .*{pattern}"):
        safe_load(path)
    with pytest.raises(ValueError, match=f"safe_load_metadata: .*{pattern}"):
        safe_load_metadata(path)


def test_missing_file_and_bad_paths(tmp_path):
    missing = tmp_path / "nope.safetensors"
    with pytest.raises(FileNotFoundError, match=r"safe_load: no such file: .*nope.safetensors"):
        safe_load(missing)
    with pytest.raises(FileNotFoundError, match=r"safe_load_metadata: no such file"):
        safe_load_metadata(missing)
    with pytest.raises(IsADirectoryError, match=r"safe_load: .* is a directory"):
        safe_load(tmp_path)
    with pytest.raises(TypeError, match=r"safe_load: path must be a str or os.PathLike, got int"):
        safe_load(3)
    with pytest.raises(ValueError, match=r"safe_save: cannot write .*no_dir"):
        safe_save({"x": Tensor([1.0])}, tmp_path / "no_dir" / "x.safetensors")


@pytest.mark.parametrize(
    "tensors, metadata, match",
    [
        ({"x": np.ones(2)}, None, r"safe_save: 'x' is a ndarray, not a Tensor"),
        ({1: Tensor([1.0])}, None, r"safe_save: the names must be strings, got 1"),
        ([Tensor([1.0])], None, r"safe_save: tensors must be a dict of name -> Tensor, got list"),
        ({"x": Tensor([1.0])}, {"epoch": 3}, r"safe_save: metadata must be a dict of str -> str"),
    ],
)
def test_safe_save_bad_arguments(tmp_path, tensors, metadata, match):
    path = tmp_path / "x.safetensors"
    with pytest.raises(TypeError, match=match):
        safe_save(tensors, path, metadata=metadata)
    assert not path.exists()


def test_without_safetensors_package():
    """zeptograd reads and writes safetensors files itself: without the safetensors package a file round-trips."""
    code = (
        "import sys, os, tempfile; sys.modules['safetensors'] = None\n"
        "from zeptograd import Tensor\n"
        "from zeptograd.nn.state import safe_save, safe_load\n"
        "path = os.path.join(tempfile.mkdtemp(), 'x.st')\n"
        "safe_save({'w': Tensor([1.5, 2.5]), 'i': Tensor([[7]])}, path)\n"
        "print({k: v.tolist() for k, v in sorted(safe_load(path).items())})\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "{'i': [[7]], 'w': [1.5, 2.5]}", out.stderr


def _rss() -> int:
    """This process's resident memory in bytes (Linux's /proc/self/status)."""
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_lazy_load_reads_only_what_is_copied(tmp_path):
    """A 512 MiB safetensors file of four 128 MiB tensors and a small one: loading it lazily and copying the small
    tensor and a slice of a large one to the CPU leaves the resident memory all but unchanged (the file's pages are
    mapped, not read); copying a whole large tensor, the control, grows it by that tensor's size."""
    big, small = 32 << 20, 1000  # float32 elements: 128 MiB, 4000 bytes
    names = ["big0", "big1", "small", "big2", "big3"]
    sizes = {n: small if n == "small" else big for n in names}
    header, offset = {}, 0
    for n in names:
        header[n] = {"dtype": "F32", "shape": [sizes[n]], "data_offsets": [offset, offset + 4 * sizes[n]]}
        offset += 4 * sizes[n]
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    rng = np.random.default_rng(0)
    edges = {n: rng.standard_normal(small).astype(np.float32) for n in names}  # each tensor's first and last values
    path = tmp_path / "large.safetensors"
    with open(path, "wb") as f:  # the large tensors' middles are left as holes: zeros, and fast to write
        f.write(len(text).to_bytes(8, "little") + text)
        start = f.tell()
        for n in names:
            f.write(edges[n].tobytes())
            f.seek(start + 4 * (sizes[n] - small))
            f.write(edges[n].tobytes())
            start += 4 * sizes[n]
    assert path.stat().st_size == 8 + len(text) + offset >= 512 << 20
    try:
        safe_load(path, device="disk")["small"].numpy()  # any first-use cost of the copy path, outside the measure
        before = _rss()
        lazy = safe_load(path, device="disk")
        got_small = lazy["small"].to("CPU").numpy()
        got_tail = lazy["big2"][-5:].to("CPU").numpy()
        grown = _rss() - before
        np.testing.assert_array_equal(got_small, edges["small"])
        np.testing.assert_array_equal(got_tail, edges["big2"][-5:])
        assert grown < 16 << 20, f"resident memory grew by {grown >> 20} MiB"
        before = _rss()
        whole = lazy["big1"].to("CPU").realize()
        assert _rss() - before > 100 << 20  # the measure sees a tensor read whole
        np.testing.assert_array_equal(whole[:small].numpy(), edges["big1"])
        del whole, lazy
    finally:
        gc.collect()
        path.unlink()
