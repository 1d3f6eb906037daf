"""Small PyTorch models for the fidelity bench: real training compute, small enough for a 2-core CPU.

Each builder takes the sample shape (height, width, channels) and returns ``(model, optimizer, loss_fn)``: an
``nn.Module`` whose input is the uint8 batch ``(batch, H, W, C)`` a DataLoader delivers (it scales to [0, 1] and
moves channels first itself), Adam, and cross-entropy over integer classes. ``python -m experiments.calibrate
--model bench/fidelity/torch_models.py:galaxy_cnn --batch 8 --shape 512,512,3`` measures their compute per batch.

These models know nothing of ddlio: they import only PyTorch.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

CLASSES = 10


class GalaxyCNN(nn.Module):
    """A DeepGalaxy-like image classifier shrunk for a CPU: a strided stem that downsamples early, two
    convolutions, global average pooling, a linear layer over the classes (the Keras ``deepgalaxy_cnn``'s shape)."""

    def __init__(self, channels: int = 3, classes: int = CLASSES) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(channels, 8, 5, stride=4), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.permute(0, 3, 1, 2).float().div_(255.0))


def galaxy_cnn(shape: tuple[int, ...] = (512, 512, 3)) -> tuple[nn.Module, torch.optim.Optimizer, Any]:
    """The model, its optimizer and its loss, for samples of ``shape`` (H, W, C)."""
    model = GalaxyCNN(channels=int(shape[-1]))
    return model, torch.optim.Adam(model.parameters(), lr=1e-3), nn.CrossEntropyLoss()
