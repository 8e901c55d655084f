"""The PyTorch engine's models: the same MLP as Chainer's, and torchvision's ResNet-50, defined here.

The MLP has the same layers as ``train.models.MLP`` (Linear, ReLU, Linear, ReLU,
Linear), so L is the same bytes under both frameworks. The ResNet-50 follows
torchvision's (v1.5: the stride on the 3x3 convolution, convolutions without bias,
25,557,032 parameters at 1000 classes) without depending on torchvision; it ends in
a global average pool, so it runs at any input size.
"""

from __future__ import annotations

import torch
from torch import nn

MODELS = ("mlp", "resnet50")


class MLP(nn.Module):
    def __init__(self, n_in: int, n_units: int, n_out: int):
        super().__init__()
        self.l1 = nn.Linear(n_in, n_units)
        self.l2 = nn.Linear(n_units, n_units)
        self.l3 = nn.Linear(n_units, n_out)

    def forward(self, x):
        return self.l3(torch.relu(self.l2(torch.relu(self.l1(x)))))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_size: int, ch: int, stride: int = 1):
        super().__init__()
        out = ch * self.expansion
        self.conv1, self.bn1 = nn.Conv2d(in_size, ch, 1, bias=False), nn.BatchNorm2d(ch)
        self.conv2, self.bn2 = nn.Conv2d(ch, ch, 3, stride, 1, bias=False), nn.BatchNorm2d(ch)
        self.conv3, self.bn3 = nn.Conv2d(ch, out, 1, bias=False), nn.BatchNorm2d(out)
        self.downsample = None
        if stride != 1 or in_size != out:
            self.downsample = nn.Sequential(nn.Conv2d(in_size, out, 1, stride, bias=False),
                                            nn.BatchNorm2d(out))

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = torch.relu(self.bn2(self.conv2(h)))
        h = self.bn3(self.conv3(h))
        return torch.relu(h + (x if self.downsample is None else self.downsample(x)))


class ResNet50(nn.Module):
    def __init__(self, in_channels: int = 3, n_out: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, size = [], 64
        for blocks, ch, stride in ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)):
            for i in range(blocks):
                layers.append(Bottleneck(size, ch, stride if i == 0 else 1))
                size = ch * Bottleneck.expansion
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(size, n_out)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = nn.functional.max_pool2d(h, 3, 2, 1)
        h = self.layers(h)
        return self.fc(h.mean(dim=(2, 3)))  # global average pool: 7x7 at insize 224


def build(name: str, sample_shape: tuple[int, ...], n_classes: int, n_units: int) -> nn.Module:
    if name == "mlp":
        n_in = 1
        for d in sample_shape:
            n_in *= d
        return MLP(n_in, n_units, n_classes)
    if name == "resnet50":
        return ResNet50(sample_shape[0], n_classes)
    raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")


def gradient_size(model: nn.Module) -> tuple[int, int, int]:
    """(bytes, arrays, elements) of the parameters DDP averages."""
    params = [p for p in model.parameters() if p.requires_grad]
    elements = sum(p.numel() for p in params)
    return sum(p.numel() * p.element_size() for p in params), len(params), elements
