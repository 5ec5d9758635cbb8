"""The two models Lesson 4.5.2 saved, loaded once (Lesson 4.5.3, "A Weight per Pixel").

``network``: ``mlp()`` with ``fashion_mlp.pt`` loaded, in eval mode.
``linear``: Flatten, Linear(784, 10) with ``fashion_linear.pt`` loaded.
Both weight files sit beside this module.
"""

from pathlib import Path

import torch
from fashion import test_loader
from image_loop import accuracy, mlp
from torch import nn

_here = Path(__file__).resolve().parent

network = mlp()
network.load_state_dict(torch.load(_here / "fashion_mlp.pt", weights_only=True))
network.eval()

linear = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
linear.load_state_dict(torch.load(_here / "fashion_linear.pt", weights_only=True))
linear.eval()

if __name__ == "__main__":
    # 0.1173
    print(f"{accuracy(mlp(), test_loader):.4f}")
    # 0.8677 0.8372, as in the lesson
    print(f"{accuracy(network, test_loader):.4f}", f"{accuracy(linear, test_loader):.4f}")
