"""The full-store test's training script: the store fills between its first checkpoint and
the others, however fast the machine trains.

It trains a small model for the spec's ``max_steps`` with ``workers.track``, a checkpoint
every ``checkpoint_every_steps``. After the first it waits (beating, so the watchdog keeps
it) until the test, having seen that checkpoint stored and filled the store, leaves a file
named ``filled`` beside this script; then it trains on and saves the others.
"""

from __future__ import annotations

import os
import sys
import time

import torch

from workers import track
from workers.contract import script_env

FILLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "filled")
WAIT_S = 600


def wait_for_the_fill(run: track.Run) -> None:
    deadline = time.monotonic() + WAIT_S
    while not os.path.exists(FILLED):
        if time.monotonic() > deadline:
            sys.exit(f"no {FILLED} after {WAIT_S} s: the test never filled the store")
        run.heartbeat()
        time.sleep(0.1)


def main() -> None:
    run = track.init()
    steps = int(os.environ[script_env.MAX_STEPS])
    torch.manual_seed(0)
    # About 300 kB a checkpoint with the optimizer's state: the ten fit the 16 MB store.
    model = torch.nn.Linear(256, 96)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    inputs, targets = torch.randn(64, 256), torch.randn(64, 96)
    first = True
    for step in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        run.log(step, loss=float(loss))
        if run.checkpoint_due(step):
            run.save_checkpoint(step, model=model, optimizer=optimizer)
            if first:
                wait_for_the_fill(run)
                first = False


if __name__ == "__main__":
    main()
