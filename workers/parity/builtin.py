"""``builtin:mlp``: an MLP of N linear layers trained for the run's steps, written the way
a user's parity script is (workers.parity's docstring), for a run with no script and the
benchmark (bench/parity.py)."""

from __future__ import annotations

import os

from workers import parity
from workers.contract import script_env

WIDTH = 64
BATCH = 32


def build(layers: int) -> object:
    import torch

    blocks = []
    for _ in range(layers - 1):
        blocks += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh()]
    blocks.append(torch.nn.Linear(WIDTH, 1))
    return torch.nn.Sequential(*blocks)


def main() -> None:
    import torch

    parity.seed()
    model = parity.prepare(build(int(os.environ.get(script_env.PARITY_LAYERS, "8"))))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(parity.steps()):
        inputs, targets = parity.randn(BATCH, WIDTH), parity.randn(BATCH, 1)
        with parity.probe(model, step), parity.autocast():
            loss = torch.nn.functional.mse_loss(model(inputs).float(), targets.float())
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        parity.log_loss(step, loss)
    # The INT8 pass's task metric: the negative loss on held-out inputs.
    held_in, held_out = parity.randn(4 * BATCH, WIDTH), parity.randn(4 * BATCH, 1)

    def metric(candidate: object) -> float:
        with torch.no_grad():
            return -float(torch.nn.functional.mse_loss(candidate(held_in), held_out))

    calibration = [parity.randn(BATCH, WIDTH) for _ in range(4)]
    parity.int8_check(model, calibration, metric)


if __name__ == "__main__":
    main()
