"""A tiny MindSpore training script for the tests: no npulab import but workers.track.

It trains a two-layer network on made-up data with MindSpore's own Model, LossMonitor,
TimeMonitor and ModelCheckpoint (into NPULAB_CHECKPOINT_FILES), resumes from
NPULAB_RESUME_CHECKPOINT when given, and logs its last loss through workers.track.
Arguments: EPOCHS [pause]: with "pause", a first attempt (not resumed) waits after its first
checkpoint until it is killed.
"""

import os
import sys
import time

import mindspore as ms
import mindspore.dataset as ds
import numpy as np
from mindspore import nn
from mindspore.train import (
    Callback,
    CheckpointConfig,
    LossMonitor,
    Model,
    ModelCheckpoint,
    TimeMonitor,
)

from workers import track

EPOCHS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
RESUME = os.environ.get("NPULAB_RESUME_CHECKPOINT")
PAUSE = sys.argv[2:3] == ["pause"] and not RESUME


class PauseAfterCheckpoint(Callback):
    def step_end(self, run_context):
        step = run_context.original_args().cur_step_num
        if PAUSE and step == 9:
            print("paused after the first checkpoint", flush=True)
            while True:
                time.sleep(0.1)


ms.set_seed(0)
x = np.random.RandomState(0).randn(64, 8).astype(np.float32)
y = (x.sum(axis=1, keepdims=True) > 0).astype(np.float32)
data = ds.NumpySlicesDataset({"x": x, "y": y}, shuffle=False).batch(8)
net = nn.SequentialCell(nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 1))
if RESUME:
    ms.load_param_into_net(net, ms.load_checkpoint(RESUME))
    print(f"resumed from {os.path.basename(RESUME)}", flush=True)
model = Model(net, nn.MSELoss(), nn.SGD(net.trainable_params(), 0.1))
callbacks = [LossMonitor(1), TimeMonitor()]
directory = os.environ.get("NPULAB_CHECKPOINT_FILES")
if directory:
    config = CheckpointConfig(save_checkpoint_steps=8, keep_checkpoint_max=5)
    callbacks.append(ModelCheckpoint(prefix="tiny", directory=directory, config=config))
callbacks.append(PauseAfterCheckpoint())
model.train(EPOCHS, data, callbacks=callbacks, dataset_sink_mode=False)
print(f"amp_level {model._amp_level}", flush=True)
track.init().log(EPOCHS * 8, epochs_trained=EPOCHS)
