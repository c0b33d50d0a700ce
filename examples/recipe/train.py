"""A tiny training recipe on a Zephon loader, in the shape of a TorchTitan-style one.

Run under torchrun (``torchrun --nproc-per-node G train.py``) with the environment of the
recipe contract (``zephon_chaos.recipe``). One optimizer step consumes one global batch: C lane
batches, C/G per rank, accumulated as microbatches. A checkpoint is the model and optimizer
through ``torch.distributed.checkpoint`` (DCP) plus the merged loader state that rank 0
persists last; a launch with ``ZEPHON_CHAOS_RESTORE`` resumes from one, on any world size G
that divides C.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel
from zephon import Dataset, InMemoryShard, MixtureSpec, Pipeline, StaticMixtureWorkSource

from zephon_chaos.recipe import RecipeRun

if __package__:
    from .config import LoaderConfig
else:  # run as a script: this folder is sys.path[0]
    from config import LoaderConfig  # type: ignore[no-redef]

VOCAB = 64
SEQ = 8
SHARDS = 4
ROWS_PER_SHARD = 64
MICROBATCH = 4


def toy_rows(shard: int, count: int) -> list[dict[str, Any]]:
    """Token rows that differ per (shard, index): enough structure for a loss to fall."""
    return [
        {"input_ids": [(shard * 131 + i * 17 + t * 5) % VOCAB for t in range(SEQ)]}
        for i in range(count)
    ]


def build_loader(config: LoaderConfig) -> Pipeline:
    dataset = Dataset.from_dict(
        "toy", {s: InMemoryShard(toy_rows(s, ROWS_PER_SHARD)) for s in range(SHARDS)}
    )
    source = StaticMixtureWorkSource(
        datasets=[dataset],
        mixture=MixtureSpec({"toy": 1.0}),
        chunk_size=8,
        seed=11,
        shuffle_within_shard=True,
        exhausted_policy="repeat",
    )
    return Pipeline(source).batch(microbatch_size=MICROBATCH).options(**config.to_zephon_options())


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.head = nn.Linear(32, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.embed(tokens)))


class Trainer:
    def __init__(self, run: RecipeRun, device: torch.device) -> None:
        self.run = run
        self.device = device
        torch.manual_seed(0)  # the same initial model on every rank and every world size
        self.model = DistributedDataParallel(
            TinyLM().to(device), device_ids=[device.index] if device.type == "cuda" else None
        )
        self.optim = torch.optim.AdamW(self.model.parameters(), lr=1e-2)
        self.loss = nn.CrossEntropyLoss()
        config = LoaderConfig.from_env(aggregate_timeout_s=60.0)
        self.pipe = build_loader(config)

    # ---- checkpoints -------------------------------------------------------------------
    def save(self, step: int) -> None:
        loader_state = self.run.checkpoint(self.pipe.checkpoint, step)  # collective
        target = self.run.checkpoint_dir(step)
        model_sd, optim_sd = get_state_dict(self.model, self.optim)
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(target / "model"))
        if self.run.rank == 0:
            self.run.save_loader_state(step, loader_state)  # last: completes the checkpoint
        dist.barrier()

    def restore(self) -> int:
        restored = self.run.load_loader_state()
        if restored is None:
            return 0
        step, loader_state = restored
        model_sd, optim_sd = get_state_dict(self.model, self.optim)
        state = {"model": model_sd, "optim": optim_sd}
        dcp.load(state, checkpoint_id=str(self.run.restore_from / "model"))
        set_state_dict(
            self.model, self.optim, model_state_dict=state["model"], optim_state_dict=state["optim"]
        )
        self.pipe.restore(loader_state)
        return step

    # ---- training ----------------------------------------------------------------------
    def train(self) -> None:
        run = self.run
        start = self.restore()
        batches = iter(self.pipe)
        last_loss = float("nan")
        for step in range(start, run.steps):
            if not run.step_begins(step):
                break
            self.optim.zero_grad(set_to_none=True)
            last_loss = 0.0
            for micro in range(run.microbatches):
                batch = next(batches)
                run.record_batch(batch)
                data = batch.to_training(tokens_field="input_ids", return_labels=True)
                inputs = data["input_ids"].to(self.device, non_blocking=True)
                labels = data["labels"].to(self.device, non_blocking=True)
                sync = micro == run.microbatches - 1  # all-reduce once per optimizer step
                with contextlib.nullcontext() if sync else self.model.no_sync():
                    logits = self.model(inputs)
                    loss = self.loss(logits.flatten(0, 1), labels.flatten()) / run.microbatches
                    loss.backward()
                last_loss += float(loss.detach())
            self.optim.step()
            if run.should_checkpoint(step):
                self.save(step)
        checksum = sum(float(p.detach().double().sum()) for p in self.model.parameters())
        run.note("trained", start=start, loss=last_loss, param_sum=checksum)


@record
def main() -> None:
    run = RecipeRun.from_env()
    if run.backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    dist.init_process_group(run.backend)
    try:
        Trainer(run, device).train()
        run.end()
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
