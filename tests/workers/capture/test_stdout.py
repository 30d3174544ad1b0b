"""The recogniser of printed metrics, line by line, and its bound on keys."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from workers.capture.sink import Sink
from workers.capture.stdout import Recogniser
from workers.contract.capture import MAX_STDOUT_KEYS, STDOUT
from workers.events import EventWriter, iter_events


def points(lines: list[str], patterns: list[str] | None = None) -> list[tuple[str, int, float]]:
    recogniser = Recogniser(patterns)
    found = []
    for line in lines:
        found += [(key, step, value) for key, step, value, _ in recogniser.feed(line)]
    return found


def test_word_language_model_lines_count_steps_across_epochs() -> None:
    found = points(
        [
            "| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 45.12 | loss  6.98 "
            "| ppl  1077.80",
            "| epoch   2 |   200/ 2983 batches | lr 20.00 | ms/batch 44.00 | loss  5.10 "
            "| ppl   164.02",
        ]
    )
    assert ("loss", 200, 6.98) in found
    assert ("ppl", 200, 1077.8) in found
    assert ("lr", 200, 20.0) in found
    assert ("ms/batch", 200, 45.12) in found
    # Epoch stays a metric, and the batch counter goes on across epochs: 2983 + 200.
    assert ("epoch", 200, 1.0) in found
    assert ("loss", 3183, 5.1) in found


def test_hugging_face_trainer_dicts_take_their_line_count_as_step() -> None:
    found = points(
        [
            "{'loss': 0.52, 'grad_norm': 1.3, 'learning_rate': 1e-05, 'epoch': 0.3}",
            "{'loss': 0.41, 'grad_norm': 1.1, 'learning_rate': 9e-06, 'epoch': 0.6}",
            '{"eval_loss": NaN, "step": 40}',
        ]
    )
    assert ("loss", 1, 0.52) in found
    assert ("learning_rate", 2, 9e-06) in found
    assert ("epoch", 2, 0.6) in found
    [(key, step, value)] = [point for point in found if point[0] == "eval_loss"]
    assert (key, step) == ("eval_loss", 40)
    assert math.isnan(value)


def test_ms_swifts_dicts_give_their_step_as_global_step_of_max_steps() -> None:
    # ModelScope's ms-swift (LLaMA-Factory's peer on Ascend) adds its progress to the
    # Trainer's dict: the step as "N/M", times as text.
    found = points(
        [
            "{'loss': 1.47077751, 'grad_norm': 10.5625, 'learning_rate': 2e-06, "
            "'token_acc': 0.65511727, 'epoch': 0.01, 'global_step/max_steps': '1/94', "
            "'percentage': '1.06%', 'elapsed_time': '2s', 'remaining_time': '4m 28s', "
            "'memory(GiB)': 4.87, 'train_speed(iter/s)': 0.345807}",
            "{'loss': 1.58882141, 'grad_norm': 10.75, 'learning_rate': 1e-05, "
            "'token_acc': 0.61763144, 'epoch': 0.05, 'global_step/max_steps': '5/94', "
            "'percentage': '5.32%', 'elapsed_time': '10s', 'remaining_time': '3m 12s', "
            "'memory(GiB)': 5.64, 'train_speed(iter/s)': 0.46146}",
        ]
    )
    assert ("loss", 1, 1.47077751) in found
    assert ("loss", 5, 1.58882141) in found
    assert ("memory_gib", 5, 5.64) in found
    assert ("train_speed_iter/s", 5, 0.46146) in found
    keys = {key for key, _, _ in found}
    assert not keys & {"global_step", "global_step/max_steps", "percentage", "elapsed_time"}


def test_hugging_face_trainers_progress_bar_prints_its_numbers_as_strings() -> None:
    # Transformers' ProgressCallback writes each float as f"{v:.4g}" (5.25 here).
    found = points(
        [
            "{'loss': '2.303', 'grad_norm': '1.234', 'learning_rate': '5e-05', 'epoch': '0.1'}",
            "{'eval_loss': 'nan', 'eval_runtime': '1.2', 'epoch': '1'}",
        ]
    )
    assert found[:4] == [
        ("loss", 1, 2.303),
        ("grad_norm", 1, 1.234),
        ("learning_rate", 1, 5e-05),
        ("epoch", 1, 0.1),
    ]
    assert ("eval_runtime", 2, 1.2) in found
    assert math.isnan(next(value for key, _, value in found if key == "eval_loss"))


def test_tqdm_postfixes_use_the_bar_counter_as_step() -> None:
    bar = (
        " 5%|▌         | 50/1000 [00:01<00:20, 45.2it/s, loss=0.523, lr=0.001]"
        "\r 6%|▌         | 60/1000 [00:01<00:20, 45.2it/s, loss=0.51, lr=0.001]"
    )
    found = points([bar])
    assert ("loss", 50, 0.523) in found
    assert ("loss", 60, 0.51) in found
    assert ("lr", 60, 0.001) in found


def test_bracketed_epoch_and_step_lines() -> None:
    found = points(
        [
            "Epoch [1/10], Step [100/600], Loss: 0.5234",
            "Epoch [2/10], Step [100/600], Loss: 0.4012",
        ]
    )
    assert found == [
        ("epoch", 100, 1.0),
        ("loss", 100, 0.5234),
        ("epoch", 700, 2.0),
        ("loss", 700, 0.4012),
    ]


def test_mindspore_loss_monitor_lines_go_on_when_the_step_starts_again() -> None:
    found = points(["epoch: 1 step: 10, loss is 2.3012", "epoch: 2 step: 5, loss is 2.1"])
    assert ("loss", 10, 2.3012) in found
    assert ("epoch", 10, 1.0) in found
    assert ("loss", 15, 2.1) in found


def test_a_loss_monitor_printing_once_an_epoch_goes_on_across_epochs() -> None:
    # LossMonitor(per_print_times=1875) on an epoch of 1875 steps: its step is the
    # epoch's, the same on each line; TimeMonitor's line after it keeps that step.
    found = points(
        [
            "epoch: 1 step: 1875, loss is 0.3012",
            "Train epoch time: 12345.678 ms, per step time: 6.584 ms",
            "epoch: 2 step: 1875, loss is 0.1456",
            "Train epoch time: 11345.678 ms, per step time: 6.051 ms",
            "epoch: 3 step: 1875, loss is 0.0987",
        ]
    )
    assert [(step, value) for key, step, value in found if key == "loss"] == [
        (1875, 0.3012),
        (3750, 0.1456),
        (5625, 0.0987),
    ]
    assert ("step_time", 3750, 6.051) in found


# MindFormers' MFLossMonitor, through its logger: in sink mode the loss, otherwise the
# step's loss and the mean so far ("loss:[current/mean]"); its progress line after each.
MINDFORMERS_PREFIX = (
    "2025-03-04 10:11:12,345 - mindformers[mindformers/core/callback/callback.py:520] - INFO - "
)
MINDFORMERS_PROGRESS = (
    "2025-03-04 10:11:12,346 - mindformers[mindformers/core/callback/callback.py:540] - INFO - "
    "  5.0% |██                                                | 1.23456 samples/s/p  0:03:04 }"
)


def test_mindformers_loss_monitor_lines_count_their_steps_across_epochs() -> None:
    found = points(
        [
            MINDFORMERS_PREFIX + "{ Epoch:[  1/  2], step:[    5/  100], loss: 10.376, "
            "per_step_time: 1523ms, lr: 1e-05, overflow cond: False, loss_scale: 1.0, "
            "global_norm: [2.875], train_throughput_per_npu: 12.345T",
            MINDFORMERS_PROGRESS,
            MINDFORMERS_PREFIX + "{ Epoch:[  2/  2], step:[    5/  100], loss:[9.876/10.012], "
            "per_step_time: 1498ms, lr: [1.e-05], overflow cond: False, loss_scale: 1.0, "
            "global_norm: [2.5]",
            MINDFORMERS_PROGRESS,
        ]
    )
    # A value's unit written onto it ("1523ms", "12.345T": TFLOPS) is its name's last word.
    assert found == [
        ("epoch", 5, 1.0),
        ("loss", 5, 10.376),
        ("per_step_time_ms", 5, 1523.0),
        ("lr", 5, 1e-05),
        ("loss_scale", 5, 1.0),
        ("global_norm", 5, 2.875),
        ("train_throughput_per_npu_t", 5, 12.345),
        # (2 - 1) * 100 + 5, as MindFormers counts its global step; the loss, not the mean.
        ("epoch", 105, 2.0),
        ("loss", 105, 9.876),
        ("per_step_time_ms", 105, 1498.0),
        ("lr", 105, 1e-05),
        ("loss_scale", 105, 1.0),
        ("global_norm", 105, 2.5),
    ]


def test_a_mindspore_tensor_as_print_shows_it_gives_its_value() -> None:
    found = points(
        [
            "epoch: 1 step: 3, loss is Tensor(shape=[], dtype=Float32, value= 2.05)",
            # A loss-scaled cell's outputs: the loss, the overflow flag, the scale.
            "epoch: 1 step: 4, loss is (Tensor(shape=[], dtype=Float32, value= 2.01), "
            "Tensor(shape=[], dtype=Bool, value= False), "
            "Tensor(shape=[], dtype=Float32, value= 65536))",
        ]
    )
    assert found == [("epoch", 3, 1.0), ("loss", 3, 2.05), ("epoch", 4, 1.0), ("loss", 4, 2.01)]


def test_the_imagenet_examples_meters_and_validation_lines() -> None:
    # PyTorch's examples/imagenet (its ProgressMeter): epochs from 0, tab-separated
    # meters of value and (average); its validation lines are the "Test" phase's.
    found = points(
        [
            "Epoch: [0][  10/5005]\tTime  0.512 ( 0.873)\tData  0.001 ( 0.254)\t"
            "Loss 6.9073e+00 (6.9091e+00)\tAcc@1   0.00 (  0.14)\tAcc@5   0.39 (  0.50)",
            "Test: [ 0/196]\tTime  1.234 ( 1.234)\tLoss 5.1234e+00 (5.1234e+00)\t"
            "Acc@1   3.12 (  3.12)\tAcc@5  10.94 ( 10.94)",
            " * Acc@1 3.120 Acc@5 10.940",
            "Epoch: [1][  10/5005]\tTime  0.512 ( 0.873)\tData  0.001 ( 0.254)\t"
            "Loss 5.9073e+00 (5.9091e+00)\tAcc@1   1.00 (  0.14)\tAcc@5   2.39 (  0.50)",
        ]
    )
    assert ("loss", 10, 6.9073) in found
    assert ("acc@1", 10, 0.0) in found
    assert ("epoch", 10, 0.0) in found
    # The validation's batch is no training step: its metrics belong to the last one.
    assert ("test_loss", 10, 5.1234) in found
    assert ("test_acc@5", 10, 10.94) in found
    # 1 × 5005 + 10: the next epoch's batch 10.
    assert ("loss", 5015, 5.9073) in found
    # The phase is no metric, nor is the summary after the validation (a mean of its
    # own that would land on the training's acc@1 and acc@5).
    assert "test" not in {key for key, _, _ in found}
    assert points([" * Acc@1 3.120 Acc@5 10.940"]) == []


def test_the_mnist_examples_lines_count_samples_across_epochs() -> None:
    # PyTorch's examples/mnist and the scripts made from it: epochs from 1, then the
    # samples of the epoch seen so far.
    found = points(
        [
            "Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.305115",
            "Train Epoch: 1 [640/60000 (1%)]\tLoss: 1.359780",
            "Val Epoch: 1 [1000/10000 (10%)]\tLoss: 0.412000",
            "Train Epoch: 2 [640/60000 (1%)]\tLoss: 0.259780",
            "2026-12-06 10:00:00 INFO Epoch: 3 [128/60000] loss: 0.1",
        ]
    )
    assert ("loss", 0, 2.305115) in found
    assert ("loss", 640, 1.35978) in found
    assert ("epoch", 640, 1.0) in found
    # Its validation lines keep the training's step; they are no part of its series.
    assert ("val_loss", 640, 0.412) in found
    # 60,000 samples of the first epoch, then 640 of the second.
    assert ("loss", 60640, 0.25978) in found
    assert ("loss", 120128, 0.1) in found
    keys = {key for key, _, _ in found}
    assert keys == {"loss", "epoch", "val_loss"}


def test_timm_validation_lines_with_padded_values() -> None:
    found = points(
        [
            "Test: [   0/48]  Time: 0.986 (0.986)  Loss:  0.4214 (0.4214)  "
            "Acc@1: 91.4062 (91.4062)  Acc@5: 98.4375 (98.4375)"
        ]
    )
    assert found == [
        ("test_time", 1, 0.986),
        ("test_loss", 1, 0.4214),
        ("test_acc@1", 1, 91.4062),
        ("test_acc@5", 1, 98.4375),
    ]


def test_timms_training_lines_count_their_updates_across_epochs() -> None:
    # timm's train.py: "Train: <epoch> [<update>/<updates per epoch> (<percent>)]", both
    # from 0, then its meters; its epoch is no metric named after the phase.
    found = points(
        [
            "Train: 0 [   0/1251 (  0%)]  Loss: 6.94 (6.94)  Time: 2.461s,  416.04/s  "
            "(2.461s,  416.04/s)  LR: 1.000e-05  Data: 1.742 (1.742)",
            "Train: 0 [  50/1251 (  4%)]  Loss: 6.90 (6.92)  Time: 0.312s,  820.51/s  "
            "(0.345s,  742.03/s)  LR: 1.000e-05  Data: 0.012 (0.015)",
            "Test: [   0/48]  Time: 0.986 (0.986)  Loss:  5.4214 (5.4214)  "
            "Acc@1: 1.4062 (1.4062)  Acc@5: 8.4375 (8.4375)",
            "Train: 1 [  50/1251 (  4%)]  Loss: 6.10 (6.12)  Time: 0.312s,  820.51/s  "
            "(0.345s,  742.03/s)  LR: 2.000e-05  Data: 0.012 (0.015)",
        ]
    )
    assert ("loss", 0, 6.94) in found
    assert ("loss", 50, 6.9) in found
    assert ("lr", 50, 1e-05) in found
    assert ("data", 50, 0.012) in found
    assert ("epoch", 50, 0.0) in found
    assert ("test_loss", 50, 5.4214) in found
    # 1 × 1251 + 50.
    assert ("loss", 1301, 6.1) in found
    assert "train" not in {key for key, _, _ in found}


def test_swin_transformers_lines_give_epoch_and_step() -> None:
    # Swin Transformer's main.py and the repositories made from it: "[epoch/epochs]
    # [step/steps]", both from 0, then tab-separated "key value (average)" meters.
    line = (
        "[2021-04-01 12:00:00 swin_tiny_patch4_window7_224](main.py 227): INFO "
        "Train: [1/300][10/1251]\teta 0:20:30 lr 0.000100\t wd 0.0500\t"
        "time 0.9812 (0.9812)\tloss 6.9078 (6.9123)\tgrad_norm 2.3456 (2.3456)\t"
        "loss_scale 65536.0000 (65536.0000)\tmem 12345MB"
    )
    found = points([line])
    assert found == [
        ("epoch", 1261, 1.0),
        ("lr", 1261, 0.0001),
        ("wd", 1261, 0.05),
        ("time", 1261, 0.9812),
        ("loss", 1261, 6.9078),
        ("grad_norm", 1261, 2.3456),
        ("loss_scale", 1261, 65536.0),
    ]


def test_mmengines_epoch_and_iteration_lines_and_its_validation() -> None:
    # MMEngine's LogProcessor (MMDetection, MMPretrain, MMSegmentation ...): epochs and
    # iterations from 1; "eta" is a clock, no number.
    prefix = "2023/06/05 12:00:00 - mmengine - INFO - "
    found = points(
        [
            prefix + "Epoch(train)  [1][ 50/313]  base_lr: 1.0000e-01 lr: 1.0000e-01  "
            "eta: 0:15:38  time: 0.0567  data_time: 0.0099  memory: 1425  loss: 2.3156",
            prefix + "Epoch(val)  [1][ 50/79]    eta: 0:00:08  time: 0.0234  data_time: 0.0089",
            prefix + "Epoch(val) [1][79/79]    accuracy/top1: 46.5400  accuracy/top5: 91.9500  "
            "data_time: 0.0099  time: 0.0247",
            prefix + "Epoch(train)  [2][ 50/313]  base_lr: 1.0000e-01 lr: 1.0000e-01  "
            "eta: 0:14:02  time: 0.0561  data_time: 0.0098  memory: 1425  loss: 1.9021",
        ]
    )
    assert ("loss", 50, 2.3156) in found
    assert ("base_lr", 50, 0.1) in found
    assert ("memory", 50, 1425.0) in found
    assert ("val_accuracy/top1", 50, 46.54) in found
    # (2 - 1) × 313 + 50.
    assert ("loss", 363, 1.9021) in found
    keys = {key for key, _, _ in found}
    assert not keys & {"eta", "val_eta", "train", "val"}
    iterations = points([prefix + "Iter(train) [  50/1000]  lr: 2.0000e-02  loss: 1.2345"])
    assert iterations == [("lr", 50, 0.02), ("loss", 50, 1.2345)]


def test_torchvisions_metric_logger_lines() -> None:
    # torchvision's references (classification, detection, DETR ...): "Epoch: [0]" and
    # the counter apart, two spaces between meters, an "eta" clock that may count days.
    found = points(
        [
            "Epoch: [0]  [   0/5005]  eta: 7:11:13  lr: 0.1  img/s: 46.05  "
            "loss: 6.9306 (6.9306)  acc1: 0.0000 (0.0000)  acc5: 0.0000 (0.0000)  "
            "time: 5.1711  data: 2.3956  max mem: 3264",
            "Epoch: [1]  [  10/5005]  eta: 1 day, 2:03:04  lr: 0.1  img/s: 812.40  "
            "loss: 5.1234 (5.2000)  acc1: 3.1250 (2.0000)  acc5: 9.3750 (8.0000)  "
            "time: 0.3150  data: 0.0010  max mem: 3264",
        ]
    )
    assert ("loss", 0, 6.9306) in found
    assert ("img/s", 0, 46.05) in found
    assert ("max_mem", 0, 3264.0) in found
    assert ("loss", 5015, 5.1234) in found
    assert ("acc5", 5015, 9.375) in found
    assert "eta" not in {key for key, _, _ in found}


def test_megatron_and_mindspeed_lines_keep_their_long_names() -> None:
    # Megatron-LM's training_log, as MindSpeed-LLM prints it on Ascend too.
    line = (
        " [2024-06-01 12:00:00] iteration       10/     500 | consumed samples:          640 "
        "| elapsed time per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 187.3 "
        "| learning rate: 1.500000E-05 | global batch size:    64 | lm loss: 1.053648E+01 "
        "| loss scale: 1.0 | grad norm: 12.345 | number of skipped iterations:   0 "
        "| number of nan iterations:   0 |"
    )
    assert points([line]) == [
        ("consumed_samples", 10, 640.0),
        ("elapsed_time_per_iteration_ms", 10, 1234.5),
        ("throughput_per_gpu_tflop/s/gpu", 10, 187.3),
        ("learning_rate", 10, 1.5e-05),
        ("global_batch_size", 10, 64.0),
        ("lm_loss", 10, 10.53648),
        ("loss_scale", 10, 1.0),
        ("grad_norm", 10, 12.345),
        ("number_of_skipped_iterations", 10, 0.0),
        ("number_of_nan_iterations", 10, 0.0),
    ]


def test_deepspeeds_pipeline_and_timer_lines() -> None:
    # DeepSpeed's PipelineEngine (GPT-NeoX, Megatron-DeepSpeed) every steps_per_print, with
    # a unit in its key, and a wall-clock timer's line, whose rank is who printed it.
    found = points(
        [
            "steps: 10 loss: 2.3012 iter time (s): 0.451 samples/sec: 70.937",
            "step:    20 /  1000 loss: 2.1004 iter time (s): 0.448 samples/sec: 71.412 "
            "eta: 0:07:19 ",
            "step:    30 /  1000 loss: 2.0001 iter time (s): 0.449 samples/sec: 71.300 eta: 12s ",
            "[Rank 0] rank=0 time (ms) | fwd_microstep: 95.12 | bwd_microstep: 190.35 "
            "| step_microstep: 20.68",
        ]
    )
    assert found[:6] == [
        ("loss", 10, 2.3012),
        ("iter_time_s", 10, 0.451),
        ("samples/sec", 10, 70.937),
        ("loss", 20, 2.1004),
        ("iter_time_s", 20, 0.448),
        ("samples/sec", 20, 71.412),
    ]
    keys = {key for key, _, _ in found}
    assert {"fwd_microstep", "bwd_microstep", "step_microstep"} <= keys
    assert not keys & {"rank", "eta"}


def test_who_printed_a_line_is_no_metric() -> None:
    found = points(
        [
            "epoch: 1 rank=1 local_rank: 1 loss=0.5",
            '{"rank": 0, "world_size": 8, "node_rank": 0, "loss": 1.5, "step": 7}',
        ]
    )
    assert found == [("epoch", 1, 1.0), ("loss", 1, 0.5), ("loss", 7, 1.5)]


def test_torchtitans_line_with_its_colours_and_thousands() -> None:
    # torchtitan prints tokens a second with thousands separators ("{tps:,}").
    line = (
        "[rank0]:[titan] 2025-03-14 10:12:45,123 - root - INFO - \x1b[31mstep:  5  "
        "\x1b[32mloss:  8.1234  \x1b[33mmemory: 35.53GiB(37.39%)  \x1b[34mtps: 1,287  "
        "\x1b[36mtflops: 1,059.51  \x1b[35mmfu: 19.08%\x1b[39m"
    )
    assert points([line]) == [
        ("loss", 5, 8.1234),
        ("memory_gib", 5, 35.53),
        ("tps", 5, 1287.0),
        ("tflops", 5, 1059.51),
        ("mfu", 5, 19.08),
    ]


def test_nanogpts_percent_and_its_evaluation_line() -> None:
    found = points(
        [
            "step 0: train loss 4.2874, val loss 4.2823",
            "iter 0: loss 4.2649, time 12034.56ms, mfu -100.00%",
            "iter 10: loss 3.2345, time 123.45ms, mfu 12.34%",
        ]
    )
    assert ("train_loss", 0, 4.2874) in found
    assert ("val_loss", 0, 4.2823) in found
    assert ("loss", 10, 3.2345) in found
    assert ("mfu", 10, 12.34) in found


def test_fairseqs_simple_and_json_lines_step_by_their_updates() -> None:
    found = points(
        [
            "2024-05-01 10:00:00 | INFO | train_inner | epoch 001:     10 / 1000 loss=14.155, "
            "nll_loss=14.155, ppl=18242.6, wps=13829.4, ups=2.13, wpb=6513.5, bsz=256, "
            "num_updates=10, lr=1.25e-06, gnorm=5.373, train_wall=5, gb_free=10.1, wall=6",
            '{"epoch": 1, "update": 0.02, "loss": "13.774", "nll_loss": "13.774", '
            '"ppl": "14008.9", "num_updates": "20", "lr": "2.5e-06", "gnorm": "4.9"}',
        ]
    )
    assert ("loss", 10, 14.155) in found
    assert ("wps", 10, 13829.4) in found
    assert ("loss", 20, 13.774) in found
    assert ("ppl", 20, 14008.9) in found
    assert "num_updates" not in {key for key, _, _ in found}


def test_a_step_word_that_leads_key_equals_value_pairs_gives_the_step() -> None:
    assert points(["Iteration 100: loss = 0.5, lr = 0.01", "Iteration 200: loss = 0.4"]) == [
        ("loss", 100, 0.5),
        ("lr", 100, 0.01),
        ("loss", 200, 0.4),
    ]
    assert points(["Step 30: train_loss=1.25 val_loss=1.5"]) == [
        ("train_loss", 30, 1.25),
        ("val_loss", 30, 1.5),
    ]


def test_counters_after_a_step_word_or_inside_brackets() -> None:
    # Accelerate-style scripts' "Step N/M:", and PyTorch-GAN's "[Epoch N/M] [Batch N/M]"
    # (its epochs from 0).
    assert points(["Step 10/1000: loss=2.301 lr=1.0e-4"]) == [
        ("loss", 10, 2.301),
        ("lr", 10, 0.0001),
    ]
    found = points(
        [
            "[Epoch 0/200] [Batch 10/938] [D loss: 0.693147] [G loss: 0.701200]",
            "[Epoch 0/200] [Batch 937/938] [D loss: 0.512000] [G loss: 0.900000]",
            "[Epoch 1/200] [Batch 10/938] [D loss: 0.412000] [G loss: 1.100000]",
        ]
    )
    assert ("d_loss", 10, 0.693147) in found
    assert ("g_loss", 937, 0.9) in found
    # The batch counter starts again: the run goes on past where it was.
    later = [step for key, step, _ in found if key == "d_loss"][-1]
    assert later > 937


def test_keras_epoch_headers_are_no_metric_lines() -> None:
    found = points(
        [
            "Epoch 1/10",
            "100/100 - 2s - 15ms/step - accuracy: 0.9123 - loss: 0.3012",
            "Epoch 2/10",
            "100/100 - 1s - 9ms/step - accuracy: 0.9456 - loss: 0.2011",
        ]
    )
    assert [(key, step) for key, step, _ in found] == [
        ("accuracy", 1),
        ("loss", 1),
        ("accuracy", 2),
        ("loss", 2),
    ]


def test_lightnings_progress_bar_goes_on_across_epochs_and_its_version_is_no_metric() -> None:
    found = points(
        [
            "Epoch 0: 100%|██████████| 100/100 [00:10<00:00,  9.50it/s, v_num=3, train_loss=2.310]",
            "Epoch 1:  10%|█         | 10/100 [00:11<00:09,  9.50it/s, v_num=3, train_loss=1.210]",
        ]
    )
    assert found == [("train_loss", 100, 2.31), ("train_loss", 110, 1.21)]
    # A bar whose description counts epochs: the bar's own counter is the step.
    assert points(["Epoch 1/10:  10%|█         | 10/100 [00:01<00:09,  9.50it/s, loss=2.3]"]) == [
        ("loss", 10, 2.3)
    ]


def test_paddles_comma_separated_line_with_units_and_a_day_long_eta() -> None:
    line = (
        "[2022/08/15 10:00:00] ppocr INFO: epoch: [1/500], global_step: 10, lr: 0.001000, "
        "loss: 1.2345, avg_reader_cost: 0.12345 s, avg_batch_cost: 0.23456 s, "
        "avg_samples: 16.0, ips: 68.23 samples/s, eta: 1 day, 2:03:04"
    )
    found = points([line])
    assert ("loss", 10, 1.2345) in found
    assert ("avg_batch_cost", 10, 0.23456) in found
    assert ("ips", 10, 68.23) in found
    assert ("epoch", 10, 1.0) in found
    assert "eta" not in {key for key, _, _ in found}


def test_key_value_segments_and_a_nanogpt_line() -> None:
    found = points(["iter 20: loss 1.2345, time 12.34ms, mfu 3.4%", "train loss=0.5 acc=0.9"])
    assert ("loss", 20, 1.2345) in found
    assert ("train_loss", 20, 0.5) in found
    assert ("acc", 20, 0.9) in found


def test_nothing_is_taken_from_inside_a_traceback() -> None:
    found = points(
        [
            "Traceback (most recent call last):",
            '  File "train.py", line 3, in <module>',
            "    loss = 5",
            "ValueError: loss=3",
            "step 7 | loss 0.25",
        ]
    )
    assert found == [("loss", 7, 0.25)]


def test_torchruns_report_of_failed_workers_is_no_metric() -> None:
    # What torchrun prints when a worker dies, after the ChildFailedError traceback.
    found = points(
        [
            "=" * 56,
            "train.py FAILED",
            "-" * 56,
            "Failures:",
            "[1]:",
            "  time      : 2026-12-05_11:38:47",
            "  host      : localhost",
            "  rank      : 0 (local_rank: 0)",
            "  exitcode  : -15 (pid: 24230)",
            "  error_file: <N/A>",
            "  traceback : Signal 15 (SIGTERM) received by PID 24230",
            "-" * 56,
            "Root Cause (first observed failure):",
            "[0]:",
            "  rank      : 1 (local_rank: 1)",
            "  exitcode  : -6 (pid: 24231)",
            "=" * 56,
            "step 8 | loss 0.5",
        ]
    )
    assert found == [("loss", 8, 0.5)]


def test_a_scripts_own_failed_line_stops_no_metrics() -> None:
    found = points(["validation FAILED", "step 8 | loss 0.5", "=" * 20, "step 9 | loss 0.4"])
    assert found == [("loss", 8, 0.5), ("loss", 9, 0.4)]


def test_plain_prose_with_numbers_is_no_metric() -> None:
    assert points(["Downloading model 123 files", "Loaded 50000 images in 3.2 seconds"]) == []
    assert points(["npulab: rank 0 of 1, local rank 0, cpu device 0, pid 1234"]) == []


def test_metric_patterns_replace_the_default() -> None:
    pattern = r"it=(?P<step>\d+) objective (?P<objective>[-.\d]+)"
    found = points(["it=7 objective -1.5", "loss: 3"], [pattern])
    assert found == [("objective", 7, -1.5)]


def test_binary_garbage_and_very_long_lines_give_nothing() -> None:
    garbage = bytes(range(256)).decode("utf-8", errors="replace") * 4
    assert points([garbage, "x" * 1_000_000, "loss: 1" + "0" * 10_000]) == []
    # A tensor's repr that never ends: matched in one pass, not tried at every split.
    unended = "Tensor(shape=[], dtype=Float32, value=" + " " * 4000 + "x"
    assert points([unended]) == []


def test_keys_are_bounded_with_one_notice(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    writer = EventWriter(str(path))
    sink = Sink(writer, STDOUT, MAX_STDOUT_KEYS)
    recogniser = Recogniser()
    for n in range(1000):
        sink.write(recogniser.feed(f"key{n}: {n}"))
    sink.write(recogniser.feed("k" * 10_000 + ": 1"))
    sink.write(recogniser.feed("a" * 150 + " " + "b" * 150 + "=1"))
    writer.close()
    events = list(iter_events(str(path)))
    keys = {event["key"] for event in events if event["type"] == "metric"}
    assert len(keys) == MAX_STDOUT_KEYS
    notices = [event["line"] for event in events if event["type"] == "log"]
    assert len([line for line in notices if "more than 100 distinct" in line]) == 1
    assert all(event.get("source") == STDOUT for event in events if event["type"] == "metric")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_values_are_written_as_gaps(tmp_path: Path, value: str) -> None:
    path = tmp_path / "events.jsonl"
    writer = EventWriter(str(path))
    Sink(writer, STDOUT, 10).write(Recogniser().feed(f"loss: {value}"))
    writer.close()
    [event] = list(iter_events(str(path)))
    assert (event["value"], event["nonfinite"]) == (None, repr(float(value)))


def test_mindspore_log_lines_and_call_stacks_are_no_metrics() -> None:
    # As a CPU MindSpore 2.10.0 prints them (tests/fixtures/mindspore/).
    lines = [
        "[WARNING] COMMON(20625,7f3b1dfdbb80,python):2026-12-05-02:31:46.902.794 "
        "[mindspore/ccsrc/utils/comm_manager.cc:82] GetInstance] CommManager instance for CPU "
        "not found, return default instance.",
        "mindspore/ccsrc/frontend/jit/ps/parse/parse.cc:1025 ParseExprNode",
        "epoch: 1 step: 10, loss is 2.3012",
    ]
    assert points(lines) == [("epoch", 10, 1.0), ("loss", 10, 2.3012)]


def test_of_several_ranks_lines_only_rank_zeros_give_metrics() -> None:
    # Two data-parallel workers under msrun, as the training runner relays their logs.
    lines = [
        "Start worker process with rank id:1, log file:/r/msrun/worker_1.log. Environment "
        "variable [RANK_ID=1] is exported. Execute command: python launch.py train.py",
        "[rank0]: npulab: rank 0 of 2, local rank 0, cpu device 0, pid 20424",
        "[rank1]: epoch: 1 step: 1, loss is 0.29",
        "[rank0]: epoch: 1 step: 1, loss is 0.31",
        "[rank1]: epoch: 1 step: 2, loss is 0.27",
        "[rank0]: epoch: 1 step: 2, loss is 0.28",
    ]
    losses = [(step, value) for key, step, value in points(lines) if key == "loss"]
    assert losses == [(1, 0.31), (2, 0.28)]
    assert {key for key, _, _ in points(lines)} == {"epoch", "loss"}


@pytest.mark.parametrize(
    "line",
    [
        "aclrtMemcpy failed, error code 507899",
        "[ERROR] RUNTIME(12,python):2025-01-01 kernel task 3 failed",
        "EZ9999: Inner Error! rank 3 timeout 1800",
        "Warning: step 10 took 4.2 s",
        "RuntimeError: shape mismatch at layer 12",
    ],
)
def test_lines_that_report_a_failure_give_no_metric(line: str) -> None:
    assert Recogniser().feed(line) == []


def test_a_metric_named_for_an_error_rate_is_still_a_metric() -> None:
    assert Recogniser().feed("step 3 | val_error 0.12 | top1_err 0.3") != []
