"""Train an MLP on a synthetic dataset, save its weights to a safetensors file and load them into a new model.

    python -m zeptograd.examples.mlp

The data: points in the plane on three interleaved spirals (one class each), a problem a linear model cannot
solve; a second draw of the spirals tests the model. The model: 2 -> 64 -> 64 -> 3 with ReLU, trained with SGD
and Nesterov momentum on the whole dataset each step. After training, `safe_save(get_state_dict(model), path)`
writes the weights; `load_state_dict(new_model, safe_load(path))` reads them into a freshly initialized model,
which then predicts exactly what the first did.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

from zeptograd import Tensor, TinyJit, nn
from zeptograd.nn import optim
from zeptograd.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save


class MLP:
    def __init__(self, hidden: int = 64, classes: int = 3) -> None:
        self.layers = [nn.Linear(2, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, classes)]

    def __call__(self, x: Tensor) -> Tensor:
        for layer in self.layers[:-1]:
            x = layer(x).relu()
        return self.layers[-1](x)


def spirals(points_per_class: int, classes: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """`classes` noisy spiral arms, `points_per_class` points each: (N, 2) float32 points, (N,) int32 labels."""
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.05, 1.0, points_per_class)
        theta = np.linspace(c * 2 * np.pi / classes, c * 2 * np.pi / classes + 3.5, points_per_class)
        theta = theta + rng.normal(0, 0.15, points_per_class)
        xs.append(np.stack([r * np.sin(theta), r * np.cos(theta)], axis=1))
        ys.append(np.full(points_per_class, c))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.int32)


def predict(model: MLP, x: Tensor) -> np.ndarray:
    return model(x).argmax(axis=1).numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    Tensor.manual_seed(args.seed)
    x_np, y_np = spirals(200, 3, rng)
    x_test, y_test = spirals(100, 3, rng)  # fresh noise: points the model has not seen
    x, y = Tensor(x_np), Tensor(y_np)
    model = MLP()
    opt = optim.SGD(get_parameters(model), lr=0.1, momentum=0.9, nesterov=True)

    @TinyJit  # from the third step on, the step replays its captured kernels: no graph, no schedule
    def train_step(x: Tensor, y: Tensor) -> Tensor:
        loss = model(x).sparse_categorical_crossentropy(y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    for step in range(args.steps):
        loss = train_step(x, y)
        if step % 100 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {loss.item():.4f}")
    print(f"train accuracy: {(predict(model, x) == y_np).mean():.4f}")
    predicted = predict(model, Tensor(x_test))
    print(f"test accuracy: {(predicted == y_test).mean():.4f}")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mlp.safetensors")
        safe_save(get_state_dict(model), path)
        print(f"saved {len(get_state_dict(model))} tensors, {os.path.getsize(path)} bytes")
        restored = MLP()
        load_state_dict(restored, safe_load(path))
        same = np.array_equal(predict(restored, Tensor(x_test)), predicted)
    print(f"the loaded model predicts the same: {same}")


if __name__ == "__main__":
    main()
