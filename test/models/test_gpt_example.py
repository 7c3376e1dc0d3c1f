"""The byte-level GPT example (zeptograd.examples.gpt), in short runs of a tiny model: the loss falls well below
uniform bytes' ln(256), a resumed run repeats the losses of the uninterrupted one, greedy sampling picks the
argmax of the model's logits, and the command line trains, saves, resumes and samples."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from zeptograd import Tensor
from zeptograd.examples import gpt as example
from zeptograd.models.generation import CachedLogits
from zeptograd.models.sampling import Sampler

# a model's graphs are thousands of nodes: the pyrender round trip of every graph built (conftest) is the IR tests'
pytestmark = pytest.mark.no_roundtrip

TINY = example.Settings(
    layers=1, d_model=32, heads=2, context=32, batch=16, steps=80, lr=1e-2, warmup=5, eval_windows=32
)


@pytest.fixture(scope="module")
def text() -> tuple[np.ndarray, np.ndarray]:
    train_files, held_out_files = example.source_files()
    assert train_files and held_out_files
    return example.read_bytes(train_files[:40]), example.read_bytes(held_out_files[:5])


@pytest.fixture(scope="module")
def trained(text) -> tuple[example.Trainer, list[float]]:
    trainer = example.Trainer(TINY, *text)
    losses = [trainer.train_step() for _ in range(TINY.steps)]
    return trainer, losses


def test_split_is_deterministic_and_disjoint(tmp_path):
    for name in ("a.py", "b.py", "pkg/c.py", "pkg/d.py", "site-packages/e.py", "notes.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(f"# {name}\n")
    train, held_out = example.source_files(tmp_path)
    names = sorted(p.relative_to(tmp_path).as_posix() for p in train + held_out)
    assert names == ["a.py", "b.py", "pkg/c.py", "pkg/d.py"] and not set(train) & set(held_out)
    assert (train, held_out) == example.source_files(tmp_path)
    real_train, real_held = example.source_files()
    assert 0.05 < len(real_held) / (len(real_train) + len(real_held)) < 0.15


def test_batches_are_windows_of_the_text(text):
    train = text[0]
    x, y = example.batch_at(train, 7, 4, 16, seed=1)
    assert x.shape == y.shape == (4, 16) and x.dtype == np.int32
    assert np.array_equal(x[:, 1:], y[:, :-1])
    haystack = train.tobytes()
    for row_x, row_y in zip(x, y):
        assert bytes(row_x.astype(np.uint8)) + bytes([row_y[-1]]) in haystack
    again, _ = example.batch_at(train, 7, 4, 16, seed=1)
    other, _ = example.batch_at(train, 8, 4, 16, seed=1)
    assert np.array_equal(x, again) and not np.array_equal(x, other)


def test_loss_falls_well_below_uniform(trained):
    trainer, losses = trained
    assert losses[0] > 5.0  # GPT-2's small init: close to uniform bytes, ln(256) = 5.55
    assert np.mean(losses[-10:]) < 3.2
    assert trainer.evaluate() < 3.3  # held-out files, not trained on


def test_resume_repeats_the_uninterrupted_losses(text, tmp_path):
    settings = example.Settings(**{**TINY.__dict__, "steps": 12, "warmup": 3})
    first, stop = 8, 4
    straight = example.Trainer(settings, *text)
    losses = [straight.train_step() for _ in range(first)]
    path = tmp_path / "ckpt.safetensors"
    straight.save(path)
    losses += [straight.train_step() for _ in range(stop)]

    assert example.checkpoint_settings(path) == settings
    resumed = example.Trainer(example.checkpoint_settings(path), *text)  # a fresh model and optimizer
    resumed.load(path)
    assert resumed.step == first
    resumed_losses = [resumed.train_step() for _ in range(stop)]
    np.testing.assert_allclose(resumed_losses, losses[first:], rtol=1e-6)
    for a, b in zip(straight.params, resumed.params):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)
    assert resumed.opt.lr.item() == straight.opt.lr.item()


def test_greedy_sampling_is_the_argmax_of_the_logits(trained):
    model = trained[0].model
    context = model.config.context
    prompt = b"def f(self"
    out = example.generate(model, prompt, context + 6 - len(prompt), Sampler(temperature=0.0))
    ids = list(prompt + out)
    # within the context: one forward of the whole sequence, unpadded; causal attention makes position i's
    # logits those of the prefix ids[: i + 1]
    logits = model(Tensor(np.array([ids[:context]], np.int32))).numpy()[0]
    for i in range(len(prompt) - 1, context - 1):
        assert ids[i + 1] == int(np.argmax(logits[i])), f"byte {i + 1}"
    # past the context: the last `context` bytes, a full window
    for end in range(context, len(ids)):
        window = model(Tensor(np.array([ids[end - context : end]], np.int32))).numpy()[0, -1]
        assert ids[end] == int(np.argmax(window)), f"byte {end}"
    # and the cached logits themselves match the unpadded forward's, step by step
    logits_of = CachedLogits(model)
    for n in range(1, context + 1):
        np.testing.assert_allclose(logits_of(ids[:n]), logits[n - 1], rtol=1e-4, atol=1e-4)


def test_sampling_is_reproducible_from_the_seed(trained):
    model = trained[0].model
    draw = [example.generate(model, b"import ", 12, Sampler(0.9, top_k=20, top_p=0.9, seed=s)) for s in (3, 3, 4)]
    assert draw[0] == draw[1] and len(draw[0]) == 12


def test_command_line_trains_saves_resumes_and_samples(trained, tmp_path, monkeypatch, capsys):
    # in this process, at the sizes the fixture trained: its compiled kernels serve these runs too
    path = tmp_path / "run.safetensors"
    common = ["--checkpoint", str(path), "--sample-bytes", "20", "--eval-every", "5"]
    sizes = ["--layers", "1", "--d-model", "32", "--heads", "2", "--context", "32", "--batch", "16", "--files", "10"]
    monkeypatch.setattr(sys, "argv", ["gpt", *sizes, "--steps", "10", *common])
    example.main()
    run = capsys.readouterr()
    last = run.out.strip().splitlines()[-1]
    assert last.startswith("held-out loss: ") and "tokens/s" in last and last.endswith(" s)")
    assert "step 5: train loss" in run.out and "step 10: train loss" in run.out
    assert "loss=" in run.err and "tok_s=" in run.err  # the progress bar
    assert path.exists() and f"saved {path} (step 10)" in run.out
    # resuming a finished run trains no more steps: it evaluates, saves and samples
    monkeypatch.setattr(sys, "argv", ["gpt", "--resume", str(path), *common])
    example.main()
    again = capsys.readouterr().out
    assert "resuming" in again and f"saved {path} (step 10)" in again
    assert again.strip().splitlines()[-1].split(",")[0] == last.split(",")[0]  # the same held-out loss
