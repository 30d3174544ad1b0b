"""Data-parallel MindSpore training for the tests: one process per worker, under msrun.

Each worker trains the two-layer network of train_tiny.py on its own shard of the data;
MindSpore's collectives (mccl on CPU) average the gradients, so every worker ends with the
same weights, which it prints. No npulab import. Arguments: [FAIL_RANK]: that rank raises
after its first step.
"""

import sys

import mindspore as ms
import mindspore.dataset as ds
import numpy as np
from mindspore import nn
from mindspore.communication import get_group_size, get_rank, init
from mindspore.train import Callback, LossMonitor, Model

FAIL_RANK = int(sys.argv[1]) if len(sys.argv) > 1 else -1

init()
rank, size = get_rank(), get_group_size()
ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL, gradients_mean=True)


class FailOnRank(Callback):
    def on_train_step_end(self, run_context):
        if rank == FAIL_RANK:
            raise ValueError(f"rank {rank} gives up")


ms.set_seed(0)
x = np.random.RandomState(0).randn(64, 8).astype(np.float32)
y = (x.sum(axis=1, keepdims=True) > 0).astype(np.float32)
data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False, num_shards=size, shard_id=rank).batch(
    8
)
net = nn.SequentialCell(nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 1))
model = Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), 0.1))
model.train(2, data, callbacks=[LossMonitor(1), FailOnRank()], dataset_sink_mode=False)
checksum = sum(float(p.asnumpy().sum()) for p in net.trainable_params())
print(f"weights {checksum:.6f}", flush=True)
