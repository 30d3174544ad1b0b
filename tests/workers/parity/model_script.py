"""A parity script for the tests: side b misbehaves as its first argument says.

ok: nothing; noise: the second linear layer's weights get noise; shape: side b's second
layer is wider; fail: side b raises; stall-fail: side b raises while side a waits for
ever; nan: side b's second layer makes a NaN; meet: each side waits until the other has
started (they must run at the same time), then as ok.
"""

from __future__ import annotations

import os
import sys
import time

import torch

from workers import parity


class Model(torch.nn.Module):
    def __init__(self, wide: bool = False) -> None:
        super().__init__()
        self.first = torch.nn.Linear(16, 16)
        self.second = torch.nn.Linear(16, 24 if wide else 16)
        self.head = torch.nn.Linear(24 if wide else 16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.first(x))
        x = self.second(x)
        return self.head(torch.tanh(x))


MEET_S = 300


def meet() -> None:
    """Say this side has started, then wait for the other side to say so."""
    here = parity.side_dir()
    with open(os.path.join(here, "started"), "w"):
        pass
    other = os.path.join(os.path.dirname(here), "a" if parity.side() == "b" else "b", "started")
    deadline = time.monotonic() + MEET_S
    while not os.path.exists(other):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the other side did not start within {MEET_S} s")
        time.sleep(0.05)


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
    side_b = parity.side() == "b"
    if mode == "meet":
        meet()
    if side_b and mode in ("fail", "stall-fail"):
        raise RuntimeError("side b refuses on purpose")
    if mode == "stall-fail":
        time.sleep(3600)
    parity.seed()
    model = Model(wide=side_b and mode == "shape")
    if side_b and mode == "noise":
        with torch.no_grad():
            model.second.weight.add_(torch.randn(16, 16) * 0.5)
    if side_b and mode == "nan":
        with torch.no_grad():
            model.second.bias[0] = float("nan")
    model = parity.prepare(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(parity.steps()):
        x, y = parity.randn(8, 16), parity.randn(8, 1)
        with parity.probe(model, step), parity.autocast():
            loss = torch.nn.functional.mse_loss(model(x).float(), y.float())
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        parity.log_loss(step, loss)


if __name__ == "__main__":
    main()
