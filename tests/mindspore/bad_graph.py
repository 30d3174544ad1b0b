"""A network MindSpore's Graph mode cannot compile: a set literal in construct."""

import mindspore as ms
import numpy as np
from mindspore import nn


class Net(nn.Cell):
    def construct(self, x):
        y = {1, 2}
        return x + y.pop()


Net()(ms.Tensor(np.ones(3, np.float32)))
