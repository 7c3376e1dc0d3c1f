"""torch_load (zeptograd.nn.torch_load): checkpoints written by torch.save, read without torch, compared with what
torch.load reads from the same file; pickles that would run code are refused without running it."""

from __future__ import annotations

import collections
import gc
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from zeptograd import Tensor, dtypes, nn
from zeptograd.nn.state import load_state_dict, torch_load

torch = pytest.importorskip("torch")

FORMATS = {"zip": True, "legacy": False}


def _rss() -> int:
    """This process's resident memory in bytes (Linux's /proc/self/status)."""
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def _save(obj, path, fmt: str) -> str:
    torch.save(obj, str(path), _use_new_zipfile_serialization=FORMATS[fmt])
    return str(path)


def _assert_same(ref, got, where: str = "") -> None:
    """`got` (torch_load's) holds what `ref` (torch.load's) holds: the same structure, each tensor's values, shape
    and dtype (bfloat16 and fp8 compared as torch's float32 conversion)."""
    if isinstance(ref, torch.Tensor):
        ref = ref.detach()
        assert isinstance(got, Tensor), where
        assert got.shape == tuple(ref.shape), where
        assert got.dtype is getattr(dtypes, str(ref.dtype).removeprefix("torch.")), where
        narrow = ref.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2)
        np.testing.assert_array_equal(got.numpy(), (ref.float() if narrow else ref).numpy(), err_msg=where)
    elif isinstance(ref, dict):
        assert type(got) is type(ref) and list(got) == list(ref), where
        for k in ref:
            _assert_same(ref[k], got[k], f"{where}.{k}")
    elif isinstance(ref, (list, tuple)):
        assert type(got) is type(ref) and len(got) == len(ref), where
        for i, (r, g) in enumerate(zip(ref, got)):
            _assert_same(r, g, f"{where}[{i}]")
    else:
        assert got == ref and type(got) is type(ref), where


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("device", [None, "disk"])
def test_state_dict_of_a_torch_model(tmp_path, fmt, device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.Flatten(), torch.nn.Linear(12, 4)
    )
    model(torch.randn(5, 2, 4, 4))  # training mode: the running statistics and the batch count move
    path = _save(model.state_dict(), tmp_path / "model.pt", fmt)
    got = torch_load(path, device=device)
    _assert_same(torch.load(path), got)
    assert got["1.num_batches_tracked"].dtype is dtypes.int64 and got["1.num_batches_tracked"].item() == 1
    on = (lambda d: d.startswith("DISK:")) if device == "disk" else (lambda d: d == "CPU")
    assert all(on(t.device) for t in got.values())


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("device", [None, "disk"])
def test_views_of_one_storage(tmp_path, fmt, device):
    """Tensors viewing one storage at offsets, transposed, with steps, broadcast (stride 0) and overlapping (an
    as_strided window): each reads the right elements."""
    base = torch.arange(60, dtype=torch.float32)
    grid = base.view(5, 12)
    obj = {
        "base": base,
        "rows": grid[1:3],
        "offset_view": base[7:19].view(3, 4),
        "transposed": grid.t(),
        "columns": grid[:, 2:5],
        "step": grid[1::2, ::3],
        "permuted": base.view(3, 4, 5).permute(2, 0, 1),
        "broadcast": base[:4].expand(3, 4),
        "windows": base.as_strided((4, 3), (2, 1), 5),
        "element": base[9],
        "empty": base[3:3].view(0, 4),
    }
    path = _save(obj, tmp_path / "views.pt", fmt)
    ref = torch.load(path)
    assert not ref["transposed"].is_contiguous() and ref["offset_view"].storage_offset() == 7
    got = torch_load(path, device=device)
    _assert_same(ref, got)


def test_one_view_named_twice_is_one_tensor(tmp_path):
    w = torch.randn(3, 2)
    got = torch_load(_save({"embed": w, "head": w, "other": w.t()}, tmp_path / "tied.pt", "zip"))
    assert got["embed"] is got["head"] and got["other"] is not got["embed"]
    np.testing.assert_array_equal(got["other"].numpy(), w.t().numpy())


@pytest.mark.parametrize("fmt", FORMATS)
def test_dtypes(tmp_path, fmt):
    values = torch.tensor([[1.0, -2.5, 3.140625], [1e-3, 200.0, -0.0]])
    obj = {
        "bfloat16": values.bfloat16(),
        "float16": values.half(),
        "float64": values.double(),
        "int64": torch.tensor([-(2**63), 2**40, 7]),
        "int32": torch.tensor([-(2**31), 5], dtype=torch.int32),
        "int16": torch.tensor([-300], dtype=torch.int16),
        "int8": torch.tensor([-128, 127], dtype=torch.int8),
        "uint8": torch.tensor([0, 255], dtype=torch.uint8),
        "bool": torch.tensor([[True, False], [False, True]]),
        "bool_transposed": torch.tensor([[True, False], [False, False]]).t(),
    }
    if fmt == "zip":  # the legacy format has no storage class for fp8 (torch.load cannot read it back either)
        obj["float8_e4m3fn"] = values.to(torch.float8_e4m3fn)
        obj["float8_e5m2"] = values.to(torch.float8_e5m2)
    path = _save(obj, tmp_path / "dtypes.pt", fmt)
    _assert_same(torch.load(path), torch_load(path))
    _assert_same(torch.load(path), torch_load(path, device="disk"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_nested_containers_and_python_values(tmp_path, fmt):
    obj = {
        "model": collections.OrderedDict(w=torch.ones(2, 2), b=torch.zeros(2)),
        "optimizer": {"state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.full((2,), 0.5)}}, "lr": 1e-3},
        "layers": [torch.tensor([1, 2]), (torch.tensor(2.5), "name", None), []],
        "epoch": 7,
        "tags": {"a", "b"},
        "blob": b"\x00\xffbytes",
        "flag": True,
        "scalar": torch.tensor(-4, dtype=torch.int64),
    }
    path = _save(obj, tmp_path / "nested.pt", fmt)
    got = torch_load(path)
    _assert_same(torch.load(path), got)
    assert got["scalar"].shape == () and got["scalar"].item() == -4


def test_torch_dtypes_as_values_are_zeptograd_dtypes(tmp_path):
    got = torch_load(_save({"dtype": torch.bfloat16, "pair": (torch.int64, torch.bool)}, tmp_path / "dt.pt", "zip"))
    assert got == {"dtype": dtypes.bfloat16, "pair": (dtypes.int64, dtypes.bool)}


def test_a_tensor_with_attributes_loads_as_its_values(tmp_path):
    t = torch.tensor([1.5, -2.0])
    t.note = "kept by torch, dropped here"
    got = torch_load(_save({"t": t}, tmp_path / "attrs.pt", "zip"))
    assert isinstance(got["t"], Tensor) and got["t"].tolist() == [1.5, -2.0]


def test_a_tensor_subclass_is_refused(tmp_path):
    path = _save({"t": _Sub(torch.ones(2))}, tmp_path / "sub.pt", "zip")
    with pytest.raises(pickle.UnpicklingError, match=r"refusing to load global '.*_Sub' from .*sub.pt"):
        torch_load(path)


def test_a_parameter_loads_as_its_values(tmp_path):
    p = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    got = torch_load(_save({"p": p}, tmp_path / "param.pt", "zip"))
    assert isinstance(got["p"], Tensor) and got["p"].tolist() == [1.0, 2.0]


class _Sub(torch.Tensor):
    pass


class _Evil:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_the_payload_runs_under_plain_pickle(tmp_path):
    """The malicious pickle of the tests below is live: plain pickle.loads runs it (so their checks can fail)."""
    marker = tmp_path / "ran"
    pickle.loads(pickle.dumps(_Evil(str(marker))))
    assert marker.exists()


@pytest.mark.parametrize("kind", ["zip", "legacy", "plain_pickle", "plain_pickle_protocol_5"])
def test_code_in_a_checkpoint_is_refused(tmp_path, kind):
    marker = tmp_path / "pwned"
    path = tmp_path / "model.pt"
    evil = {"w": torch.ones(2), "evil": _Evil(str(marker))}
    if kind in FORMATS:
        _save(evil, path, kind)
    else:
        path.write_bytes(pickle.dumps(_Evil(str(marker)), protocol=5 if kind.endswith("5") else 2))
    with pytest.raises(pickle.UnpicklingError, match=r"torch_load: refusing to load global 'posix.system' from .*"):
        torch_load(path)
    assert not marker.exists()


def test_a_whole_model_is_refused_naming_its_class(tmp_path):
    path = _save(torch.nn.Linear(2, 2), tmp_path / "whole.pt", "zip")
    with pytest.raises(
        pickle.UnpicklingError, match=r"'torch.nn.modules.linear.Linear' from .*whole.pt: only tensors.*state_dict"
    ):
        torch_load(path)


def test_unsupported_dtype_and_bad_files(tmp_path):
    path = _save({"c": torch.ones(2, dtype=torch.complex64)}, tmp_path / "complex.pt", "zip")
    with pytest.raises(TypeError, match=r"torch_load: .*complex.pt has a tensor of torch.complex64"):
        torch_load(path)
    text = tmp_path / "text.pt"
    text.write_text("not a checkpoint\n")
    with pytest.raises(ValueError, match=r"torch_load: .*text.pt is not a PyTorch checkpoint"):
        torch_load(text)
    good = _save({"w": torch.ones(4)}, tmp_path / "good.pt", "legacy")
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(Path(good).read_bytes()[:-3])
    with pytest.raises(ValueError, match=r"torch_load: .*truncated.pt is truncated"):
        torch_load(truncated)
    with pytest.raises(FileNotFoundError, match=r"torch_load: no such file"):
        torch_load(tmp_path / "nope.pt")
    with pytest.raises(IsADirectoryError, match=r"torch_load: .* is a directory"):
        torch_load(tmp_path)
    with pytest.raises(TypeError, match=r"torch_load: path must be a str or os.PathLike, got int"):
        torch_load(3)


def test_loads_without_torch(tmp_path):
    """torch_load imports no torch: in a process where `import torch` fails, a checkpoint loads."""
    path = _save({"w": torch.arange(6.0).view(2, 3).t(), "n": 3}, tmp_path / "no_torch.pt", "zip")
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from zeptograd.nn.state import torch_load\n"
        "got = torch_load(sys.argv[1])\n"
        "print(got['w'].tolist(), got['n'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]] 3", out.stderr


def test_a_tar_file_is_named(tmp_path):
    import tarfile

    path = tmp_path / "old.tar"
    (tmp_path / "sys_info").write_bytes(pickle.dumps({"little_endian": True}, protocol=2))
    with tarfile.open(path, "w") as tar:  # the old format's members: sys_info, pickle, tensors, storages
        tar.add(tmp_path / "sys_info", arcname="sys_info")
    with pytest.raises(ValueError, match=r"torch_load: .*old.tar is a tar file: the tar format .* is not read"):
        torch_load(path)


class _Net:
    """zeptograd's layers with the structure of the torch model below (names match its state_dict)."""

    def __init__(self):
        self.layers = [nn.Linear(3, 5), nn.BatchNorm(5), nn.Linear(5, 2)]

    def __call__(self, x: Tensor) -> Tensor:
        return self.layers[2](self.layers[1](self.layers[0](x)).relu())


def _torch_net():
    torch.manual_seed(0)
    net = torch.nn.Module()
    net.layers = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 2))
    net.layers(torch.randn(8, 3))  # moves the running statistics away from their initial values
    return net.eval()


@pytest.mark.parametrize("device", [None, "disk"])
def test_load_state_dict_from_torch_load(tmp_path, device):
    ref = _torch_net()
    path = _save(ref.state_dict(), tmp_path / "net.pt", "zip")
    net = _Net()
    load_state_dict(net, torch_load(path, device=device))
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    with torch.no_grad():
        expected = torch.nn.functional.relu(ref.layers[1](ref.layers[0](torch.tensor(x))))
        expected = ref.layers[2](expected).numpy()
        np.testing.assert_allclose(net(Tensor(x)).numpy(), expected, rtol=1e-5, atol=1e-6)
    assert net.layers[1].num_batches_tracked.item() == 1


def test_load_state_dict_mismatches_name_the_key(tmp_path):
    sd = _torch_net().state_dict()
    sd["layers.0.weight"] = torch.zeros(4, 3)
    path = _save(sd, tmp_path / "shape.pt", "zip")
    with pytest.raises(RuntimeError, match=r"shape mismatches \(layers.0.weight: the model has \(5, 3\), the state"):
        load_state_dict(_Net(), torch_load(path, device="disk"))
    sd = _torch_net().state_dict()
    sd["layers.1.num_batches_tracked"] = torch.tensor(1.5)
    path = _save(sd, tmp_path / "dtype.pt", "zip")
    net = _Net()
    before = net.layers[0].weight.numpy()
    with pytest.raises(RuntimeError, match=r"dtype mismatches .*layers.1.num_batches_tracked: the model has int64, "):
        load_state_dict(net, torch_load(path))
    np.testing.assert_array_equal(net.layers[0].weight.numpy(), before)  # nothing was loaded
    sd = _torch_net().state_dict()
    sd["layers.2.bias"] = sd["layers.2.bias"].double()  # float64 into float32: cast, as torch's load_state_dict casts
    net = _Net()
    load_state_dict(net, torch_load(_save(sd, tmp_path / "f64.pt", "zip")))
    assert net.layers[2].bias.dtype is dtypes.float32
    np.testing.assert_allclose(net.layers[2].bias.numpy(), sd["layers.2.bias"].float().numpy())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_lazy_load_reads_only_what_is_copied(tmp_path):
    """A 256 MiB checkpoint (written by torch in another process, whose memory is gone when it exits): loading it
    with device="disk" and copying its small tensor and a transposed slice of a large one to the CPU leaves this
    process's resident memory all but unchanged; the values are torch's."""
    path = tmp_path / "large.pt"
    code = (
        "import sys, torch\n"
        "g = torch.Generator().manual_seed(0)\n"
        "big = [torch.rand(4096, 4096, generator=g) for _ in range(4)]\n"
        "small = torch.arange(1000, dtype=torch.float64)\n"
        "torch.save({'big0': big[0], 'big1': big[1], 'small': small, 'big2': big[2], 'big3': big[3]}, sys.argv[1])\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=120)
    assert path.stat().st_size > 256 << 20
    try:
        torch_load(path, device="disk")["small"].numpy()  # any first-use cost of the copy path, outside the measure
        before = _rss()
        lazy = torch_load(path, device="disk")
        got_small = lazy["small"].to("CPU").numpy()
        got_corner = lazy["big2"].T[:3, -2:].to("CPU").numpy()
        grown = _rss() - before
        assert grown < 16 << 20, f"resident memory grew by {grown >> 20} MiB"
        ref = torch.load(path, mmap=True)
        np.testing.assert_array_equal(got_small, ref["small"].numpy())
        np.testing.assert_array_equal(got_corner, ref["big2"].T[:3, -2:].numpy())
        del lazy, ref
    finally:
        gc.collect()
        path.unlink()
