#!/usr/bin/env python3
"""PyTorch DistributedDataParallel, the peer of `kiln train --gpus N`, on the same machine and models.

One process a GPU (torch.multiprocessing), NCCL, NVLink multicast off (NCCL_NVLS_ENABLE=0, as the
device notes require). The model is kiln train's: the MLP 784-128-10 or LeNet (cnn_train_b32 of
WORKLOADS.md), SGD with momentum, softmax cross-entropy. The training set stays on each GPU (images
normalised as kiln train normalises them, or random ones with --random) and each step gathers
its batch there, as kiln's resident steps do: rank r of N takes images perm[(s N + r) B ..][0 .. B)
of the shared order. After --warmup steps, --steps steps are timed with CUDA events on every rank;
rank 0 prints one JSON line: per-GPU samples/s (median of --rounds rounds), and the first losses
(their mean over the ranks).

  python3 bench/dist/ddp.py --model mlp --batch 4096 --gpus 2 [--compile] [--data DIR]
"""
import argparse
import gzip
import json
import os
import statistics
import struct

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

PIX_MEAN, PIX_STD = 0.2860, 0.3530  # kiln train's normalisation


def load_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 2051:
        rows, cols = struct.unpack(">II", data[8:16])
        return torch.frombuffer(bytearray(data[16:]), dtype=torch.uint8).reshape(n, rows * cols)
    return torch.frombuffer(bytearray(data[8:]), dtype=torch.uint8)


def training_set(args):
    if args.random:
        g = torch.Generator().manual_seed(1)
        return torch.randn(60000, 784, generator=g), torch.randint(0, 10, (60000,), generator=g)
    x = load_idx(os.path.join(args.data, "train-images-idx3-ubyte.gz")).float() / 255.0
    y = load_idx(os.path.join(args.data, "train-labels-idx1-ubyte.gz")).long()
    return (x - PIX_MEAN) / PIX_STD, y


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(784, 128), nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 16, 3, padding=1), nn.Conv2d(16, 32, 3, padding=1)
        self.fc1, self.fc2 = nn.Linear(1568, 128), nn.Linear(128, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.c1(x.view(-1, 1, 28, 28))), 2)
        h = F.max_pool2d(F.relu(self.c2(h)), 2)
        return self.fc2(F.relu(self.fc1(h.flatten(1))))


def worker(rank, world, args, port, out):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    dev = torch.device("cuda", rank)
    torch.manual_seed(args.seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    model = (Mlp() if args.model == "mlp" else LeNet()).to(dev)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    x, y = training_set(args)
    x, y = x.to(dev), y.to(dev)
    n = x.shape[0]
    B = args.batch
    per_step = B * world
    order = torch.randperm(n, generator=torch.Generator().manual_seed(args.seed)).to(dev)
    steps_epoch = n // per_step

    def step(s):
        s %= steps_epoch
        idx = order[(s * world + rank) * B:(s * world + rank + 1) * B]
        loss = F.cross_entropy(ddp(x.index_select(0, idx)), y.index_select(0, idx))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    run = torch.compile(step) if args.compile else step
    losses = []
    for s in range(args.warmup):
        loss = run(s)
        if s < args.record:
            lm = loss.detach().clone()
            dist.all_reduce(lm, op=dist.ReduceOp.AVG)
            losses.append(lm.item())
    torch.cuda.synchronize(dev)
    rates = []
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for r in range(args.rounds):
        dist.barrier()
        a.record()
        for s in range(args.steps):
            run(args.warmup + r * args.steps + s)
        b.record()
        b.synchronize()
        rates.append(B * args.steps / (a.elapsed_time(b) / 1e3))
    if rank == 0:
        out.put({"peer": "ddp" + ("+compile" if args.compile else ""), "model": args.model, "gpus": world,
                 "batch_per_gpu": B, "samples_per_s_per_gpu": statistics.median(rates), "rounds": rates,
                 "first_losses": losses, "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                 "device": torch.cuda.get_device_name(dev)})
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["mlp", "lenet"], default="mlp")
    p.add_argument("--batch", type=int, default=4096, help="images a GPU a step")
    p.add_argument("--gpus", type=int, default=torch.cuda.device_count())
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--record", type=int, default=20, help="steps whose losses are reported")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--compile", action="store_true", help="torch.compile the step")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--random", action="store_true", help="random images instead of Fashion-MNIST")
    args = p.parse_args()
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    port = 29500 + os.getpid() % 1000
    mp.start_processes(worker, args=(args.gpus, args, port, out), nprocs=args.gpus, start_method="spawn")
    print(json.dumps(out.get()))


if __name__ == "__main__":
    main()
