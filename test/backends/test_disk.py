"""The DISK device (runtime/ops_disk.py): tensors over a file's memory map, their views, copies to compute devices
and the errors for everything else. numpy reading the same file (`np.fromfile`, views of it) is the oracle."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

from zeptograd import Tensor, dtypes
from zeptograd.engine.realize import buffer_of_view
from zeptograd.runtime.device import Device
from zeptograd.uop.movement import strided_view


@pytest.fixture
def data_file(tmp_path):
    """A file of 96 float32s (0.5, 1.5, ...), its path and its values."""
    values = np.arange(96, dtype=np.float32) + 0.5
    path = tmp_path / "w.bin"
    values.tofile(path)
    return str(path), values


def _floats(path: str, n: int = 96) -> Tensor:
    return Tensor.empty(n * 4, dtype=dtypes.uint8, device=f"disk:{path}").bitcast(dtypes.float32)


def test_device_name_keeps_the_path(data_file):
    path, _ = data_file
    t = Tensor.empty(8, dtype=dtypes.uint8, device=f"disk:{os.path.relpath(path)}")
    assert t.device == f"DISK:{path}" and Device.canonicalize(f"DISK:{path}") == t.device
    assert "DISK" not in " ".join(Device.get_available_devices())
    with pytest.raises(ValueError, match=r"the DISK device needs a file: 'disk:/path/to/file', got 'disk'"):
        Device.canonicalize("disk")


def test_views_copy_the_right_bytes(data_file):
    path, values = data_file
    x = _floats(path)
    grid = values.reshape(8, 12)
    cases = {
        "whole": (x.reshape(8, 12), grid),
        "rows": (x.reshape(8, 12)[2:5], grid[2:5]),
        "row": (x.reshape(8, 12)[3], grid[3]),
        "columns": (x.reshape(8, 12)[:, 3:7], grid[:, 3:7]),
        "block": (x.reshape(8, 12)[1:7, 2:11], grid[1:7, 2:11]),
        "step": (x.reshape(8, 12)[1::3, ::4], grid[1::3, ::4]),
        "transposed": (x.reshape(8, 12).T, grid.T),
        "permuted": (x.reshape(2, 4, 12).permute(2, 0, 1)[3:5], values.reshape(2, 4, 12).transpose(2, 0, 1)[3:5]),
        "flipped": (x[10:20].flip(0), values[10:20][::-1]),
        "expanded": (x[5:8].reshape(1, 3).expand(4, 3), np.broadcast_to(values[5:8], (4, 3))),
        "padded": (x[:3].pad(((1, 2),)), np.pad(values[:3], (1, 2))),
        "scalar": (x[7].reshape(()), values[7]),
        "empty": (x[4:4], values[4:4]),
    }
    for name, (t, expected) in cases.items():
        assert t.device.startswith("DISK:"), name
        for device in ("CPU", "PYTHON"):
            got = t.to(device)
            assert got.device == device and got.shape == expected.shape, name
            np.testing.assert_array_equal(got.numpy(), expected, err_msg=f"{name} on {device}")
        np.testing.assert_array_equal(t.numpy(), expected, err_msg=name)  # numpy() copies through the CPU


def _copied_window(t: Tensor):
    """The DISK buffer that the copy `t` reads."""
    (copy,) = [u for u in t.uop.toposort() if u.op.name == "COPY"]
    return buffer_of_view(copy.src[0])


def test_slices_are_windows_of_the_file(data_file):
    """A slice that stays contiguous in the file is a buffer of its own bytes; a copy of any other slice reads the
    bytes from its first element to its last."""
    path, values = data_file
    x = _floats(path)
    rows = x.reshape(8, 12)[2:4]
    buf = buffer_of_view(rows.uop)
    assert buf.nbytes == 2 * 12 * 4 and buf.offset == 2 * 12 * 4
    np.testing.assert_array_equal(buf.numpy(), values[24:48])
    cols = x.reshape(8, 12)[:, 1:3].to("CPU")
    source = _copied_window(cols)
    assert source.offset == 4 and source.nbytes == (7 * 12 + 2) * 4  # element 1 to element 7 * 12 + 2
    np.testing.assert_array_equal(cols.numpy(), values.reshape(8, 12)[:, 1:3])
    # a copy of a view of a permuted view moves the window from its first element to its last
    corner = x.reshape(8, 12).T[2:4, 5:7].to("CPU")
    source = _copied_window(corner)
    assert source.offset == (5 * 12 + 2) * 4 and source.nbytes == (12 + 2) * 4
    np.testing.assert_array_equal(corner.numpy(), values.reshape(8, 12).T[2:4, 5:7])


@pytest.mark.parametrize(
    "dtype, np_dtype",
    [(dtypes.int32, np.int32), (dtypes.uint16, np.uint16), (dtypes.float64, np.float64), (dtypes.int8, np.int8)],
)
def test_bitcast_reads_the_bytes_as_another_dtype(data_file, dtype, np_dtype):
    path, values = data_file
    raw = Tensor.empty(96 * 4, dtype=dtypes.uint8, device=f"disk:{path}")
    got = raw[16:64].bitcast(dtype).to("CPU").numpy()
    np.testing.assert_array_equal(got, values.view(np.uint8)[16:64].view(np_dtype))
    nested = raw.bitcast(dtypes.float32).reshape(8, 12)[1:3].bitcast(dtype).numpy()
    np.testing.assert_array_equal(nested, values.reshape(8, 12)[1:3].view(np_dtype))


def test_bitcast_to_bfloat16_and_back(tmp_path):
    bits = np.array([0x3F80, 0xC020, 0x4049, 0x0000], np.uint16)  # 1.0, -2.5, 3.140625, 0.0 in bfloat16
    path = tmp_path / "bf16.bin"
    bits.tofile(path)
    t = Tensor.empty(8, dtype=dtypes.uint8, device=f"disk:{path}").bitcast(dtypes.bfloat16)
    assert t.dtype is dtypes.bfloat16 and t.to("CPU").tolist() == [1.0, -2.5, 3.140625, 0.0]


def test_copies_to_the_default_device_realize_in_one_schedule(data_file):
    path, values = data_file
    x = _floats(path)
    a, b = x[:10].to(Device.DEFAULT), x.reshape(8, 12)[:, :2].to(Device.DEFAULT)
    Tensor.realize(a, b)
    np.testing.assert_array_equal(a.numpy(), values[:10])
    np.testing.assert_array_equal((b * 2).numpy(), values.reshape(8, 12)[:, :2] * 2)
    x.realize()  # a DISK tensor is its file's bytes: realizing it computes nothing
    x.T.realize()


@pytest.mark.parametrize(
    "op, name",
    [
        (lambda t: t + 1, "ADD"),
        (lambda t: t.sum(), "REDUCE_AXIS"),
        (lambda t: t.cast(dtypes.float16), "CAST"),
        (lambda t: t.contiguous(), "CONTIGUOUS"),
        (lambda t: t.exp(), None),
        (lambda t: t.T.contiguous(), "CONTIGUOUS"),
        (lambda t: Tensor.zeros(3, device=t.device), "a constant"),
    ],
)
def test_compute_on_disk_is_a_clear_error(data_file, op, name):
    path, _ = data_file
    x = _floats(path).reshape(8, 12)
    with pytest.raises(RuntimeError, match=rf"{name or ''}.*runs no kernels.*Copy the tensor to a compute device"):
        op(x)


def test_disk_is_read_only(data_file):
    path, values = data_file
    x = _floats(path)
    with pytest.raises(RuntimeError, match=r"assign: a tensor on DISK:.*read-only"):
        x.assign(Tensor.zeros(96))
    with pytest.raises(RuntimeError, match=r"from list on DISK:.*\.to\('disk:<file>'\) writes one"):
        Tensor([1.0, 2.0], device=f"disk:{path}")
    with pytest.raises(ValueError, match=r"cannot be the default device"):
        Device.DEFAULT = f"disk:{path}"
    assert Device.DEFAULT != f"DISK:{path}"
    np.testing.assert_array_equal(np.fromfile(path, np.float32), values)


def test_missing_and_short_files(tmp_path, data_file):
    path, _ = data_file
    with pytest.raises(FileNotFoundError, match=r"empty: DISK:.*nope.bin: no such file"):
        Tensor.empty(4, device=f"disk:{tmp_path / 'nope.bin'}")
    with pytest.raises(ValueError, match=r"empty: DISK:.*w.bin: the file has 384 bytes, a buffer of 388 bytes"):
        Tensor.empty(97, dtype=dtypes.float32, device=f"disk:{path}")
    with pytest.raises(IsADirectoryError, match=r"is not a file"):
        Tensor.empty(4, device=f"disk:{tmp_path}")


def test_a_replaced_file_is_mapped_again(tmp_path):
    path = tmp_path / "r.bin"
    np.arange(4, dtype=np.int32).tofile(path)
    first = Tensor.empty(16, dtype=dtypes.uint8, device=f"disk:{path}")[4:16].bitcast(dtypes.int32)
    assert first.tolist() == [1, 2, 3]
    replacement = tmp_path / "r2.bin"
    np.arange(10, 16, dtype=np.int32).tofile(replacement)
    os.replace(replacement, path)
    second = Tensor.empty(24, dtype=dtypes.uint8, device=f"disk:{path}")[4:24].bitcast(dtypes.int32)
    assert second.tolist() == [11, 12, 13, 14, 15]
    del first, second
    gc.collect()


def _as_strided(flat: np.ndarray, sizes: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(flat, sizes, tuple(s * item for s in strides))


def _strided(flat: np.ndarray, sizes: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray | None:
    view = strided_view(Tensor(flat).uop, sizes, strides)
    return None if view is None else Tensor(view).numpy()


def test_strided_view_matches_as_strided():
    """Random layouts of up to 3 axes (sizes 1-3, strides 0-7): where strided_view builds a view, it reads what
    numpy's as_strided reads."""
    rng = np.random.default_rng(0)
    built = 0
    for _ in range(300):
        ndim = int(rng.integers(0, 4))
        sizes = tuple(int(v) for v in rng.integers(1, 4, ndim))
        strides = tuple(int(v) for v in rng.integers(0, 8, ndim))
        length = 1 + sum((n - 1) * s for n, s in zip(sizes, strides)) + int(rng.integers(0, 3))
        flat = np.arange(length, dtype=np.int32)
        got = _strided(flat, sizes, strides)
        if got is not None:
            built += 1
            np.testing.assert_array_equal(got, _as_strided(flat, sizes, strides), err_msg=f"{sizes} {strides}")
    assert built > 200


def test_strided_view_builds_every_slice_of_a_contiguous_array():
    """Layouts that slicing (with steps), transposing and broadcasting a C-ordered array make (what a checkpoint
    holds) are all built; one that reads an element twice (an as_strided window) is declined."""
    rng = np.random.default_rng(1)
    for _ in range(100):
        shape = tuple(int(v) for v in rng.integers(1, 6, int(rng.integers(1, 4))))
        base = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
        index = []
        for n in shape:
            start, step = int(rng.integers(0, n)), int(rng.integers(1, 3))
            index.append(slice(start, int(rng.integers(start + 1, n + 1)), step))
        view = base[tuple(index)].transpose(rng.permutation(len(shape)))
        if rng.random() < 0.3:
            view = np.broadcast_to(view[None], (2, *view.shape))
        offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // 4
        strides = tuple(s // 4 for s in view.strides)
        got = _strided(base.reshape(-1)[offset:], view.shape, strides)
        assert got is not None, (view.shape, strides)
        np.testing.assert_array_equal(got, view)
    assert _strided(np.arange(5, dtype=np.int32), (3, 3), (1, 1)) is None
    np.testing.assert_array_equal(_strided(np.arange(5, dtype=np.int32), (0, 3), (1, 1)), np.zeros((0, 3)))


def test_disk_tensors_pickle_and_save_as_their_values(tmp_path, data_file):
    import pickle

    from zeptograd.nn.state import safe_load, safe_save

    path, values = data_file
    x = _floats(path).reshape(8, 12)
    back = pickle.loads(pickle.dumps(x.T))
    assert back.device == "CPU"
    np.testing.assert_array_equal(back.numpy(), values.reshape(8, 12).T)
    out = tmp_path / "copy.safetensors"
    safe_save({"t": x.T, "row": x[2], "half": x[:2].to("CPU").cast(dtypes.bfloat16)}, out)
    loaded = safe_load(out)
    np.testing.assert_array_equal(loaded["t"].numpy(), values.reshape(8, 12).T)
    np.testing.assert_array_equal(loaded["row"].numpy(), values.reshape(8, 12)[2])


def test_to_disk_writes_the_file(tmp_path, data_file):
    """`t.to("disk:path")` writes t's values as the whole file (numpy reads them back), bfloat16 as its bits; the
    file replaces the one there, and a tensor that mapped the old file keeps its old values."""
    path, values = data_file
    out = tmp_path / "out.bin"
    grid = values.reshape(8, 12)
    written = (Tensor(grid) * 2).T.to(f"disk:{out}")
    assert written.device == f"DISK:{out}" and written.shape == (12, 8)
    np.testing.assert_array_equal(np.fromfile(out, np.float32), (grid * 2).T.reshape(-1))
    np.testing.assert_array_equal(written[3].numpy(), (grid * 2).T[3])
    old = written[2:4]
    copied = _floats(path).reshape(8, 12)[1:3].to(f"disk:{out}")  # DISK to DISK: the values of one file, in another
    np.testing.assert_array_equal(np.fromfile(out, np.float32), grid[1:3].reshape(-1))
    np.testing.assert_array_equal(copied.numpy(), grid[1:3])
    np.testing.assert_array_equal(old.numpy(), (grid * 2).T[2:4])
    bf16 = Tensor([1.0, -2.5, 3.140625]).cast(dtypes.bfloat16).to(f"disk:{tmp_path / 'bf16.bin'}")
    assert np.fromfile(tmp_path / "bf16.bin", np.uint16).tolist() == [0x3F80, 0xC020, 0x4049]
    assert bf16.dtype is dtypes.bfloat16 and bf16.tolist() == [1.0, -2.5, 3.140625]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bf16.bin", "out.bin", "w.bin"]  # no temporary file left
