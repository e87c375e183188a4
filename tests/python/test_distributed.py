"""packrec.Loader under real PyTorch distributed: `python -m torch.distributed.run` starts 2 and 4
processes (gloo on loopback); each loads its rank's part of two epochs; rank 0 gathers them."""
import json
import os
import socket
import subprocess
import sys

import pytest

import packrec

WORKER = r"""
import json, os, sys
import torch.distributed as dist
import packrec
path, out = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])
loader = packrec.Loader(path, batch_size=24 // world, rank=rank, world_size=world, seed=7,
                        transform="none", output="numpy", threads=1)
epochs = []
for epoch in range(2):
    loader.set_epoch(epoch)
    mine = [[int(i) for i in batch.indices] for batch in loader.batches()]
    everyone = [None] * world
    dist.all_gather_object(everyone, mine)
    epochs.append(everyone)
if rank == 0:
    with open(out, "w") as f:
        json.dump(epochs, f)
dist.barrier()
dist.destroy_process_group()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("world", [2, 4])
def test_torch_distributed_run_ranks_share_each_epoch(datasets, tmp_path, world):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    out = tmp_path / "epochs.json"
    # The port is free when picked and closed again before torchrun listens on it, so another
    # process can take it in between: only that failure is tried again, on another port.
    for attempt in range(3):
        run = subprocess.run(
            # --redirects/--tee 1: Debian's torch 1.13 under Python 3.11 cannot parse their
            # default "0" (IntFlag iteration changed in 3.11 and skips Std.NONE), so torchrun
            # fails without.
            [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={world}",
             "--redirects=1", "--tee=1", "--nnodes=1", "--master_addr=127.0.0.1",
             f"--master_port={free_port()}",
             os.fspath(script), os.fspath(datasets["shard"]), os.fspath(out)],
            env=os.environ, capture_output=True, timeout=300, check=False)
        if run.returncode == 0 or b"Address already in use" not in run.stderr:
            break
    assert run.returncode == 0, run.stderr.decode()[-3000:]
    epochs = json.loads(out.read_text())
    n = len(packrec.open(datasets["shard"]))
    orders = []
    for everyone in epochs:
        parts = [[i for batch in batches for i in batch] for batches in everyone]
        assert len({len(part) for part in parts}) == 1            # equal parts (120 = 5 x 24)
        assert len({len(batches) for batches in everyone}) == 1   # the same steps on every rank
        flat = [i for part in parts for i in part]
        assert sorted(flat) == list(range(n))                     # disjoint, and the whole dataset
        # Every rank's part is its slice of the one global sequence a single process computes.
        single = packrec.Loader(datasets["shard"], batch_size=24, seed=7, transform="none",
                                output="numpy")
        single.set_epoch(len(orders))
        global_batches = [[int(i) for i in b.indices] for b in single.batches()]
        for step, batch in enumerate(global_batches):
            assert [i for r in range(world) for i in everyone[r][step]] == batch
        orders.append(flat)
    assert orders[0] != orders[1]                                  # set_epoch changed the order
