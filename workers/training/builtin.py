"""The built-in reference jobs: try training on a host with no code of one's own.

``builtin:cnn`` is a small CNN on synthetic images, ``builtin:lm`` a small
transformer language model on a synthetic language. Every batch is drawn
from the seed and the step (and the rank), so nothing is downloaded and a
resumed run sees exactly the batches the lost one would have. Both learn:
the CNN's loss falls from ln 10 toward 0, the language model's from ln 32
toward the language's entropy (about 0.9).
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import time
from typing import Any

from workers import track
from workers.backends import get_backend
from workers.contract import script_env

JOBS = ("cnn", "lm")
DEFAULT_STEPS = 300
VOCABULARY = 32
SEQUENCE = 32
# Each token of the synthetic language is followed by one of three tokens.
SUCCESSOR_PROBABILITIES = (0.6, 0.3, 0.1)
THROUGHPUT_EVERY = 10


def main(job: str, argv: list[str]) -> int:
    if job not in JOBS:
        print(f"unknown built-in job {job!r}; one of: {', '.join(JOBS)}")
        return 2
    settings = _settings(argv)
    import torch

    backend = get_backend(os.environ.get(script_env.DEVICE_TYPE, "cpu"))
    backend.load()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if world > 1:
        if backend.name != "cpu":
            getattr(torch, backend.name).set_device(local_rank)
        torch.distributed.init_process_group(backend=backend.dist_backend)
    device = backend.device(local_rank)
    torch.manual_seed(settings.seed)

    job_data = Job(job, settings, torch, device, rank, world)
    model = job_data.model().to(device)
    if world > 1:
        ids = [local_rank] if backend.name != "cpu" else None
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: 0.5 * (1 + math.cos(math.pi * min(step, settings.steps) / settings.steps)),
    )
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(settings.precision)
    scaler = torch.amp.GradScaler(backend.name) if settings.precision == "fp16" else None

    run = track.init()
    start, loss_first = 0, None
    resumed = run.resume()
    if resumed is not None:
        resumed.restore(model=model, optimizer=optimizer, scheduler=scheduler, scaler=scaler)
        start = resumed.data_position if resumed.data_position is not None else resumed.step + 1
        loss_first = resumed.extra.get("loss_first")
    # A run resumed from its last step trains no more: its last loss is the checkpoint's.
    loss_value = resumed.extra.get("loss_last", float("nan")) if resumed else float("nan")
    run.say(
        f"builtin:{job}: steps {start}..{settings.steps - 1}, {settings.precision}, "
        f"batch {settings.batch_size} per rank, {world} rank(s)"
    )

    window_start, window_samples = time.perf_counter(), 0
    for step in range(start, settings.steps):
        inputs, targets = job_data.batch(step)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(backend.name, dtype=dtype, enabled=dtype is not None):
            loss = job_data.loss(model, inputs, targets)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        scheduler.step()
        loss_value = float(loss.item())
        if loss_first is None:
            loss_first = loss_value
        window_samples += settings.batch_size * world
        metrics = {"loss": loss_value, "lr": scheduler.get_last_lr()[0]}
        if (step + 1) % THROUGHPUT_EVERY == 0:
            elapsed = time.perf_counter() - window_start
            metrics["samples_per_s"] = window_samples / elapsed
            window_start, window_samples = time.perf_counter(), 0
        run.log(step, **metrics)
        run.profile_step()
        if run.checkpoint_due(step) or step == settings.steps - 1:
            run.save_checkpoint(
                step,
                model=model,
                optimizer=optimizer,
                scheduler=scheduler,
                scaler=scaler,
                data_position=step + 1,
                extra={"loss_first": loss_first, "loss_last": loss_value},
            )
    if run.is_main:
        run.set_summary(job=job, steps=settings.steps, loss_first=loss_first, loss_last=loss_value)
    if world > 1:
        # DistributedDataParallel's reducer keeps the process group alive in reference
        # cycles past destroy_process_group; gloo's threads then die with the interpreter
        # and a rank aborts at exit ("terminate called without an active exception"),
        # failing a run that had finished, about one time in four on torch 2.13. Freed
        # first, the group ends in destroy_process_group.
        del model
        gc.collect()
        torch.distributed.destroy_process_group()
    return 0


class Settings:
    def __init__(self, steps: int, batch_size: int, lr: float, precision: str, seed: int) -> None:
        self.steps = steps
        self.batch_size = batch_size
        self.lr = lr
        self.precision = precision
        self.seed = seed


def _settings(argv: list[str]) -> Settings:
    """The spec's values (passed in the environment by the runner), then the job's own flags."""
    env = os.environ
    parser = argparse.ArgumentParser(prog="builtin job")
    parser.add_argument("--steps", type=int, default=int(env.get(script_env.MAX_STEPS) or 0))
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--precision", default=env.get(script_env.PRECISION, "fp32"))
    parser.add_argument("--seed", type=int, default=int(env.get(script_env.SEED, "0")))
    args = parser.parse_args(argv)
    return Settings(
        args.steps or DEFAULT_STEPS, args.batch_size, args.lr, args.precision, args.seed
    )


class Job:
    """A job's model, its deterministic batches and its loss."""

    def __init__(
        self, name: str, settings: Settings, torch: Any, device: Any, rank: int, world: int
    ) -> None:
        self.name = name
        self.settings = settings
        self.torch = torch
        self.device = device
        self.rank = rank
        self.world = world
        generator = torch.Generator().manual_seed(settings.seed)
        if name == "cnn":
            # Ten classes, each a fixed random picture; samples are noisy copies.
            self.templates = torch.randn(10, 3, 16, 16, generator=generator)
        else:
            successors = torch.stack(
                [torch.randperm(VOCABULARY, generator=generator)[:3] for _ in range(VOCABULARY)]
            )
            self.transitions = torch.zeros(VOCABULARY, VOCABULARY)
            for token in range(VOCABULARY):
                for successor, probability in zip(successors[token], SUCCESSOR_PROBABILITIES):
                    self.transitions[token, successor] = probability

    def model(self) -> Any:
        nn = self.torch.nn
        if self.name == "cnn":
            return nn.Sequential(
                nn.Conv2d(3, 32, 3, padding=1),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Conv2d(32, 32, 3, padding=1),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Flatten(),
                nn.Linear(32 * 4 * 4, 10),
            )
        return TinyLanguageModel(self.torch)

    def batch(self, step: int) -> tuple[Any, Any]:
        torch = self.torch
        seed = (self.settings.seed * 1_000_003 + step) * max(self.world, 1) + self.rank
        generator = torch.Generator().manual_seed(seed)
        size = self.settings.batch_size
        if self.name == "cnn":
            labels = torch.randint(0, 10, (size,), generator=generator)
            images = self.templates[labels] + 0.8 * torch.randn(
                size, 3, 16, 16, generator=generator
            )
            return images.to(self.device), labels.to(self.device)
        tokens = [torch.randint(0, VOCABULARY, (size,), generator=generator)]
        for _ in range(SEQUENCE):
            rows = self.transitions[tokens[-1]]
            tokens.append(torch.multinomial(rows, 1, generator=generator).squeeze(1))
        sequence = torch.stack(tokens, dim=1)
        return sequence[:, :-1].to(self.device), sequence[:, 1:].to(self.device)

    def loss(self, model: Any, inputs: Any, targets: Any) -> Any:
        logits = model(inputs)
        if self.name == "lm":
            logits = logits.reshape(-1, VOCABULARY)
            targets = targets.reshape(-1)
        return self.torch.nn.functional.cross_entropy(logits.float(), targets)


def TinyLanguageModel(torch: Any) -> Any:
    nn = torch.nn

    class Model(nn.Module):
        """Two decoder layers of width 64 over a 32-token vocabulary."""

        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.Embedding(VOCABULARY, 64)
            self.positions = nn.Embedding(SEQUENCE, 64)
            layer = nn.TransformerEncoderLayer(
                64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True
            )
            self.layers = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
            self.head = nn.Linear(64, VOCABULARY)
            self.register_buffer(
                "causal", torch.triu(torch.full((SEQUENCE, SEQUENCE), float("-inf")), diagonal=1)
            )

        def forward(self, tokens: Any) -> Any:
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            hidden = self.tokens(tokens) + self.positions(positions)
            length = tokens.shape[1]
            hidden = self.layers(hidden, mask=self.causal[:length, :length], is_causal=True)
            return self.head(hidden)

    return Model()
