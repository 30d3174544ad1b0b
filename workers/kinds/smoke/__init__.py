"""The smoke kind: is the device visible, does matmul match the CPU, does a model train?"""

from __future__ import annotations

from workers.contract import frameworks
from workers.contract.capabilities import PROFILING
from workers.contract.kinds import Kind
from workers.contract.spec import Field, common_fields

KIND = Kind(
    "smoke",
    "Smoke test: is the device visible, does matmul match the CPU, does a model train?",
    "workers.kinds.smoke.runner",
    [
        *common_fields(default_timeout_s=900, default_hang_timeout_s=600),
        Field(
            "matmul_size",
            "integer",
            default=2048,
            minimum=16,
            maximum=16384,
            help="Side of the square fp32 matrices multiplied on the device.",
        ),
        Field(
            "train_steps",
            "integer",
            default=50,
            minimum=2,
            maximum=100000,
            help="Steps of the Conv2d + LayerNorm + Adam training loop.",
        ),
        Field("seed", "integer", default=0, minimum=0, maximum=2**31 - 1),
        Field(
            "framework",
            "string",
            default=frameworks.PYTORCH,
            choices=frameworks.FRAMEWORKS,
            help="mindspore: MindSpore's run_check() and a few training steps instead "
            "(on a host whose worker has a MindSpore interpreter).",
        ),
    ],
    capabilities=(PROFILING,),
    host_labels=frameworks.required_labels,
)
