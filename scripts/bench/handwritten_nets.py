"""LeNet, CIFAR-10 quick and AlexNet written by hand in PyTorch.

bench_vs_pytorch.py builds its PyTorch nets from the timing prototxts with
caffe_net.py; these hand-written definitions of three of them are the
independent reference the tests hold caffe_net's translation to (same
parameter shapes, same loss from the same weights), and what
`bench_vs_pytorch.py --handwritten` times instead (the figures before the
generic builder were taken with them).

Each returns an nn.Sequential from the image to the logits; the loss is the
caller's (cross_entropy, as SoftmaxWithLoss).
"""

NETS = ("lenet", "cifar10_quick", "alexnet")


def build(name):
    import torch.nn as nn

    if name == "lenet":
        return nn.Sequential(
            nn.Conv2d(1, 20, 5),
            nn.MaxPool2d(2, 2, ceil_mode=True),
            nn.Conv2d(20, 50, 5),
            nn.MaxPool2d(2, 2, ceil_mode=True),
            nn.Flatten(),
            nn.Linear(50 * 4 * 4, 500),
            nn.ReLU(inplace=True),
            nn.Linear(500, 10),
        )
    if name == "cifar10_quick":
        return nn.Sequential(
            nn.Conv2d(3, 32, 5, padding=2),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            nn.ReLU(inplace=True),
            nn.Conv2d(32, 32, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.AvgPool2d(3, 2, ceil_mode=True),
            nn.Conv2d(32, 64, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.AvgPool2d(3, 2, ceil_mode=True),
            nn.Flatten(),
            nn.Linear(64 * 4 * 4, 64),
            nn.Linear(64, 10),
        )
    if name == "alexnet":
        # Caffe's LRN divides alpha by local_size, as LocalResponseNorm does.
        def lrn():
            return nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0)

        return nn.Sequential(
            nn.Conv2d(3, 96, 11, stride=4),
            nn.ReLU(inplace=True),
            lrn(),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            nn.Conv2d(96, 256, 5, padding=2, groups=2),
            nn.ReLU(inplace=True),
            lrn(),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            nn.Conv2d(256, 384, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 384, 3, padding=1, groups=2),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1, groups=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            nn.Flatten(),
            nn.Linear(256 * 6 * 6, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            nn.Linear(4096, 1000),
        )
    raise ValueError("no PyTorch definition for net '%s'" % name)
