"""The main job: train a small CNN on scikit-learn's 8x8 handwritten digits and report its test accuracy.

    pip install -e ".[examples]" && python -m zeptograd.examples.digits

The dataset (1797 images, 10 classes) ships inside scikit-learn, so nothing is downloaded. 80% trains the model,
20% tests it. The model is two 3x3 convolutions with ReLU and 2x2 max pooling, then a linear layer; Adam
minimizes the cross entropy, with the learning rate following a cosine from `--lr` down to 0. Every step is one
lazy graph: the forward pass, its gradient (`loss.backward()`) and the parameter updates (assignments, STOREs)
are cut into fused kernels and run when `opt.step()` realizes them. The step runs under TinyJit: from the
third step on it replays the kernels captured on the second, with each batch's buffers swapped in.
The last line printed is `test accuracy: 0.xxxx` with the time the run took.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from zeptograd import Tensor, TinyJit, nn
from zeptograd.nn import optim
from zeptograd.nn.state import get_parameters


class DigitsCNN:
    """(N, 1, 8, 8) images -> (N, 10) logits."""

    def __init__(self) -> None:
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 2 * 2, 10)

    def __call__(self, x: Tensor) -> Tensor:
        x = self.conv1(x).relu().max_pool2d(2)  # 16 x 4 x 4
        x = self.conv2(x).relu().max_pool2d(2)  # 32 x 2 x 2
        return self.fc(x.flatten(1))


def load_digits(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Train and test images (float32 in [0, 1], shape (N, 1, 8, 8)) and int32 labels: a stratified 80/20 split."""
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import train_test_split

    data = sklearn_digits()
    images = (data.images / 16.0).astype(np.float32)[:, None]
    labels = data.target.astype(np.int32)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=0.2, random_state=seed, stratify=labels
    )
    return x_train, y_train, x_test, y_test


def accuracy(model: DigitsCNN, x: np.ndarray, y: np.ndarray) -> float:
    with Tensor.train(False):
        predicted = model(Tensor(x)).argmax(axis=1).numpy()
    return float((predicted == y).mean())


def main() -> None:
    from tqdm import tqdm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    start = time.perf_counter()
    x_train, y_train, x_test, y_test = load_digits(args.seed)
    Tensor.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    model = DigitsCNN()
    opt = optim.Adam(get_parameters(model), lr=args.lr)

    steps_per_epoch = len(x_train) // args.batch_size  # whole batches only: every step has the same shapes
    total = args.epochs * steps_per_epoch

    @TinyJit  # from the third step on, the step replays its captured kernels: no graph, no schedule
    def train_step(x: Tensor, y: Tensor, lr: Tensor) -> Tensor:
        # the learning rate is an input: the captured kernel that copies it into the optimizer's lr buffer
        # reads each step's value (setting opt.lr to a float outside would replace that buffer and recapture)
        opt.lr = lr
        loss = model(x).sparse_categorical_crossentropy(y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    with Tensor.train(), tqdm(total=total, unit="step") as bar:
        for epoch in range(args.epochs):
            order = rng.permutation(len(x_train))
            for i in range(steps_per_epoch):
                lr = np.float32(args.lr * 0.5 * (1 + math.cos(math.pi * bar.n / total)))
                batch = order[i * args.batch_size : (i + 1) * args.batch_size]
                loss = train_step(Tensor(x_train[batch]), Tensor(y_train[batch]), Tensor(lr))
                bar.set_postfix(epoch=epoch + 1, loss=f"{loss.item():.4f}")
                bar.update()
    print(f"train accuracy: {accuracy(model, x_train, y_train):.4f}")
    print(f"test accuracy: {accuracy(model, x_test, y_test):.4f} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
