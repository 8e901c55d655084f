"""The benchmark's models: the ChainerMN MNIST MLP and ResNet-50.

Both follow Chainer's own examples (examples/mnist, examples/imagenet). The
ResNet-50 ends in a global average pool so it runs at any input size (224 is
ImageNet's; tests use a small one), with the same parameters either way.
"""

from __future__ import annotations

import chainer
import chainer.functions as F
import chainer.links as L
from chainer import initializers

MODELS = ("mlp", "resnet50")
DEFAULT_CLASSES = {"mlp": 10, "resnet50": 1000}


class MLP(chainer.Chain):
    def __init__(self, n_in: int, n_units: int, n_out: int):
        super().__init__()
        with self.init_scope():
            self.l1 = L.Linear(n_in, n_units)
            self.l2 = L.Linear(n_units, n_units)
            self.l3 = L.Linear(n_units, n_out)

    def forward(self, x):
        h1 = F.relu(self.l1(x))
        h2 = F.relu(self.l2(h1))
        return self.l3(h2)


class BottleNeckA(chainer.Chain):
    """Bottleneck with a projection shortcut (first block of a stage)."""

    def __init__(self, in_size: int, ch: int, out_size: int, stride: int = 2):
        super().__init__()
        w = initializers.HeNormal()
        with self.init_scope():
            self.conv1 = L.Convolution2D(in_size, ch, 1, stride, 0, initialW=w, nobias=True)
            self.bn1 = L.BatchNormalization(ch)
            self.conv2 = L.Convolution2D(ch, ch, 3, 1, 1, initialW=w, nobias=True)
            self.bn2 = L.BatchNormalization(ch)
            self.conv3 = L.Convolution2D(ch, out_size, 1, 1, 0, initialW=w, nobias=True)
            self.bn3 = L.BatchNormalization(out_size)
            self.conv4 = L.Convolution2D(in_size, out_size, 1, stride, 0, initialW=w, nobias=True)
            self.bn4 = L.BatchNormalization(out_size)

    def forward(self, x):
        h1 = F.relu(self.bn1(self.conv1(x)))
        h1 = F.relu(self.bn2(self.conv2(h1)))
        h1 = self.bn3(self.conv3(h1))
        h2 = self.bn4(self.conv4(x))
        return F.relu(h1 + h2)


class BottleNeckB(chainer.Chain):
    """Bottleneck with an identity shortcut."""

    def __init__(self, in_size: int, ch: int):
        super().__init__()
        w = initializers.HeNormal()
        with self.init_scope():
            self.conv1 = L.Convolution2D(in_size, ch, 1, 1, 0, initialW=w, nobias=True)
            self.bn1 = L.BatchNormalization(ch)
            self.conv2 = L.Convolution2D(ch, ch, 3, 1, 1, initialW=w, nobias=True)
            self.bn2 = L.BatchNormalization(ch)
            self.conv3 = L.Convolution2D(ch, in_size, 1, 1, 0, initialW=w, nobias=True)
            self.bn3 = L.BatchNormalization(in_size)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)))
        h = self.bn3(self.conv3(h))
        return F.relu(h + x)


class Block(chainer.ChainList):
    def __init__(self, layers: int, in_size: int, ch: int, out_size: int, stride: int = 2):
        super().__init__()
        self.add_link(BottleNeckA(in_size, ch, out_size, stride))
        for _ in range(layers - 1):
            self.add_link(BottleNeckB(out_size, ch))

    def forward(self, x):
        for f in self.children():
            x = f(x)
        return x


class ResNet50(chainer.Chain):
    def __init__(self, in_channels: int = 3, n_out: int = 1000):
        super().__init__()
        with self.init_scope():
            self.conv1 = L.Convolution2D(in_channels, 64, 7, 2, 3, initialW=initializers.HeNormal())
            self.bn1 = L.BatchNormalization(64)
            self.res2 = Block(3, 64, 64, 256, 1)
            self.res3 = Block(4, 256, 128, 512)
            self.res4 = Block(6, 512, 256, 1024)
            self.res5 = Block(3, 1024, 512, 2048)
            self.fc = L.Linear(2048, n_out)

    def forward(self, x):
        h = self.bn1(self.conv1(x))
        h = F.max_pooling_2d(F.relu(h), 3, stride=2)
        h = self.res2(h)
        h = self.res3(h)
        h = self.res4(h)
        h = self.res5(h)
        h = F.mean(h, axis=(2, 3))  # global average pool: 7x7 at insize 224
        return self.fc(h)


def build(name: str, sample_shape: tuple[int, ...], n_classes: int, n_units: int) -> L.Classifier:
    """The model wrapped in a softmax-cross-entropy Classifier."""
    if name == "mlp":
        n_in = 1
        for d in sample_shape:
            n_in *= d
        return L.Classifier(MLP(n_in, n_units, n_classes))
    if name == "resnet50":
        return L.Classifier(ResNet50(sample_shape[0], n_classes))
    raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")


def gradient_size(model: chainer.Link) -> tuple[int, int, int]:
    """(bytes, arrays, elements) of the parameters the allreduce averages."""
    nbytes = arrays = elements = 0
    for p in model.params():
        if p.array is None:
            continue
        arrays += 1
        elements += p.array.size
        nbytes += p.array.size * p.array.dtype.itemsize
    return nbytes, arrays, elements
