#!/usr/bin/env python3
"""PyTorch reference for kiln's training-step test (tests/graph/test_train_torch.c).

Builds two tiny models from weights drawn with a 64-bit LCG (the same generator is in the
C test), runs two optimizer steps with torch.optim on the same batch, and prints the loss
of each step and every parameter after the two steps, in float64, one line per tensor:
    <case> <name> <count> v0 v1 ...
Run once on a machine with PyTorch; the output is committed as tests/graph/torch_ref.txt.
    python3 tests/graph/make_torch_ref.py > tests/graph/torch_ref.txt
"""
import torch
import torch.nn.functional as F

MASK = (1 << 64) - 1


class Lcg:
    """x <- 6364136223846793005 x + 1442695040888963407 (mod 2^64); u = (x >> 11) / 2^53."""

    def __init__(self, seed):
        self.x = seed & MASK

    def uniform(self):
        self.x = (self.x * 6364136223846793005 + 1442695040888963407) & MASK
        return (self.x >> 11) / 9007199254740992.0

    def tensor(self, shape, scale):
        n = 1
        for d in shape:
            n *= d
        vals = [(2.0 * self.uniform() - 1.0) * scale for _ in range(n)]
        return torch.tensor(vals, dtype=torch.float64).reshape(shape)

    def labels(self, n, classes):
        return torch.tensor([int(self.uniform() * classes) for _ in range(n)], dtype=torch.int64)


def mlp_case(rng):
    x = rng.tensor([4, 8], 1.0)
    params = {"w1": rng.tensor([8, 6], 0.5), "b1": rng.tensor([6], 0.1),
              "w2": rng.tensor([6, 3], 0.5), "b2": rng.tensor([3], 0.1)}
    y = rng.labels(4, 3)

    def forward(p):
        h = torch.relu(x @ p["w1"] + p["b1"])
        return F.cross_entropy(h @ p["w2"] + p["b2"], y)
    return params, forward


def cnn_case(rng):
    x = rng.tensor([2, 1, 6, 6], 1.0)
    params = {"c1": rng.tensor([2, 1, 3, 3], 0.5), "cb1": rng.tensor([2], 0.1),
              "w3": rng.tensor([18, 4], 0.5), "b3": rng.tensor([4], 0.1),
              "w4": rng.tensor([4, 3], 0.5), "b4": rng.tensor([3], 0.1)}
    y = rng.labels(2, 3)

    def forward(p):
        h = F.max_pool2d(torch.relu(F.conv2d(x, p["c1"], p["cb1"], padding=1)), 2)
        h = torch.relu(h.reshape(2, 18) @ p["w3"] + p["b3"])
        return F.cross_entropy(h @ p["w4"] + p["b4"], y)
    return params, forward


def run(case, make, optim):
    params, forward = make(Lcg(12345))
    for p in params.values():
        p.requires_grad_(True)
    if optim == "sgd":
        opt = torch.optim.SGD(list(params.values()), lr=0.1, momentum=0.9)
    else:
        opt = torch.optim.Adam(list(params.values()), lr=0.01, betas=(0.9, 0.999), eps=1e-8)
    for step in range(2):
        opt.zero_grad()
        loss = forward(params)
        loss.backward()
        opt.step()
        print(f"{case}_{optim} loss{step} 1 {loss.item():.17g}")
    for name, p in params.items():
        vals = " ".join(f"{v:.17g}" for v in p.detach().reshape(-1).tolist())
        print(f"{case}_{optim} {name} {p.numel()} {vals}")


def main():
    torch.set_default_dtype(torch.float64)
    print(f"# torch {torch.__version__}, float64, two steps on one batch")
    for case, make in (("mlp", mlp_case), ("cnn", cnn_case)):
        for optim in ("sgd", "adam"):
            run(case, make, optim)


if __name__ == "__main__":
    main()
