"""packrec.Loader's state_dict / load_state_dict / resume_from on the real datasets of conftest:
stop, save, resume equals an uninterrupted epoch (in this process and across a killed one),
elastic world sizes, exact epochs, refusals."""
import json
import os
import subprocess
import sys

import pytest

import packrec
from packrec import errors


def indices(batches):
    return [int(i) for batch in batches for i in batch.indices]


def make(path, **options):
    options = {"batch_size": 7, "threads": 2, "transform": "none", "seed": 4, "output": "numpy",
               **options}
    return packrec.Loader(path, **options)


@pytest.mark.parametrize("shuffle", [True, "windowed"])
def test_stop_save_resume_equals_the_whole_epoch(datasets, shuffle):
    path = datasets["shard"]
    opts = {"shuffle": shuffle, "shuffle_window": 16}
    whole_loader = make(path, **opts)
    whole_loader.set_epoch(2)
    whole = indices(whole_loader.batches())
    batches = len(whole_loader)
    assert sorted(whole) == list(range(120)) and batches == 18  # 17 x 7 + 1
    for k in (0, 1, 9, batches - 1, batches):
        first = make(path, **opts)
        first.set_epoch(2)
        it = first.batches()
        taken = [int(i) for _ in range(k) for i in next(it).indices]  # k batches in hand
        state = json.loads(json.dumps(first.state_dict()))  # a checkpoint holds plain JSON
        assert (state["epoch"], state["position"]) == (2, min(7 * k, 120))
        del it, first
        resumed = make(path, resume_from=state, **opts)
        rest = indices(resumed.batches())
        assert resumed.stats()["images"] == len(rest)  # nothing before the position was read
        assert taken + rest == whole
        if k == batches:  # after the last batch the resumed epoch is empty; the next one follows
            assert rest == [] and resumed.epoch == 3
        else:
            # load_state_dict on a loader that has been elsewhere does the same.
            live = make(path, **opts)
            next(iter(live))
            live.load_state_dict(state)
            assert indices(live.batches()) == rest


def test_state_dict_follows_epochs_and_set_epoch(datasets):
    loader = make(datasets["lmdb"])
    assert (loader.state_dict()["epoch"], loader.state_dict()["position"]) == (0, 0)
    loader.set_epoch(5)
    assert (loader.state_dict()["epoch"], loader.state_dict()["position"]) == (5, 0)
    it = iter(loader)
    next(it), next(it)
    assert (loader.state_dict()["epoch"], loader.state_dict()["position"]) == (5, 14)
    for _ in it:
        pass
    assert (loader.state_dict()["epoch"], loader.state_dict()["position"]) == (6, 0)
    state = loader.state_dict()
    assert state["fingerprint"] == json.loads(json.dumps(state))["fingerprint"]
    assert set(state) >= {"fingerprint", "seed", "shuffle", "last_batch", "global_batch_size",
                          "world_size", "epoch", "position"}


def test_decoded_pixels_resume_exactly(datasets):
    """Random crops depend on (seed, epoch, record): resumed batches are the same pixels."""
    path = datasets["hdf5"]
    opts = {"transform": "train", "size": 32, "threads": 3}
    whole = [images.copy() for images, _ in make(path, **opts)]
    first = make(path, **opts)
    it = iter(first)
    head = [next(it)[0].copy() for _ in range(4)]
    state = first.state_dict()
    rest = [images.copy() for images, _ in make(path, resume_from=state, **opts)]
    assert len(head + rest) == len(whole)
    for got, want in zip(head + rest, whole):
        assert (got == want).all()


def test_order_does_not_depend_on_threads(datasets):
    runs = [indices(make(datasets["shard"], threads=t, prefetch=p).batches())
            for t, p in ((1, 1), (2, 4), (4, 2))]
    assert runs[0] == runs[1] == runs[2]


def test_elastic_world_sizes_share_one_global_sequence(datasets):
    path = datasets["shard"]

    def global_batches(world, **opts):
        per_rank = [list(make(path, batch_size=12 // world, rank=r, world_size=world, **opts).batches())
                    for r in range(world)]
        assert len({len(batches) for batches in per_rank}) == 1  # the same steps on every rank
        return [[int(i) for r in range(world) for i in per_rank[r][s].indices]
                for s in range(len(per_rank[0]))]

    for last in ("short", "pad", "drop"):
        one = global_batches(1, last_batch=last)
        assert global_batches(2, last_batch=last) == one
        assert global_batches(4, last_batch=last) == one

    # Saved on 2 ranks after 3 steps, resumed on 4 and on 1: the global sequence goes on.
    whole = [i for batch in global_batches(1) for i in batch]
    two = [make(path, batch_size=6, rank=r, world_size=2) for r in range(2)]
    iters = [two[r].batches() for r in range(2)]
    done = []
    for _ in range(3):
        step = [next(iters[r]) for r in range(2)]
        done.extend(int(i) for batch in step for i in batch.indices)
    state = two[1].state_dict()
    assert state["position"] == 36 and state["world_size"] == 2
    for world in (4, 1):
        resumed = [make(path, batch_size=12 // world, rank=r, world_size=world, resume_from=state)
                   for r in range(world)]
        per_rank = [list(loader.batches()) for loader in resumed]
        rest = [int(i) for s in range(len(per_rank[0])) for r in range(world) for i in per_rank[r][s].indices]
        assert done + rest == whole


def test_exact_epochs_and_the_plan(datasets):
    path = datasets["shard"]  # 120 records; 4 ranks x 8 = 32: 3 full global batches + 24
    seen = {}
    for last in ("short", "pad", "drop"):
        seen[last], padded = [], 0
        for rank in range(4):
            loader = make(path, batch_size=8, rank=rank, world_size=4, last_batch=last)
            plan = loader.plan()
            batches = list(loader.batches())
            got = indices(batches)
            assert len(got) == plan["records"] and len(batches) == plan["batches"]
            padded += sum(b.padded for b in batches)
            seen[last].extend(got)
        assert plan["padded"] == padded == (8 if last == "pad" else 0)
        assert plan["dropped"] == (24 if last == "drop" else 0)
    assert sorted(seen["short"]) == list(range(120))          # every record exactly once
    assert len(seen["pad"]) == 128 and set(seen["pad"]) == set(range(120))
    assert len(seen["drop"]) == 96 and len(set(seen["drop"])) == 96
    assert make(path, drop_last=True).last_batch == "drop"
    with pytest.raises(errors.InvalidArgumentError, match="drop_last"):
        make(path, drop_last=True, last_batch="pad")


def test_resume_refuses_what_would_not_continue(datasets, tmp_path, tree):
    loader = make(datasets["shard"])
    next(iter(loader))
    state = loader.state_dict()
    # The same listing in another format: the same records, so the same fingerprint.
    assert indices(make(datasets["lmdb"], resume_from=state).batches()) == \
        indices(make(datasets["shard"], resume_from=state).batches())
    other = tmp_path / "other.pkr"
    packrec.convert(tree, other, shuffle=True, seed=3)  # the same images in another stored order
    with pytest.raises(errors.InvalidArgumentError, match="fingerprint"):
        make(other, resume_from=state)
    with pytest.raises(errors.InvalidArgumentError, match="seed"):
        make(datasets["shard"], seed=5, resume_from=state)
    with pytest.raises(errors.InvalidArgumentError, match="shuffle"):
        make(datasets["shard"], shuffle=False, resume_from=state)
    with pytest.raises(errors.InvalidArgumentError, match="global batch"):
        make(datasets["shard"], batch_size=5, resume_from=state)
    with pytest.raises(errors.InvalidInputError, match="position"):
        make(datasets["shard"], resume_from={k: v for k, v in state.items() if k != "position"})
    live = make(datasets["shard"], seed=5)
    with pytest.raises(errors.InvalidArgumentError, match="seed"):
        live.load_state_dict(state)


CHILD = r"""
import json, os, sys
import packrec
path, state_file, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
loader = packrec.Loader(path, batch_size=7, threads=2, transform="none", seed=4, output="numpy")
taken = []
for n, batch in enumerate(loader.batches()):
    taken.extend(int(i) for i in batch.indices)
    if n + 1 == k:
        with open(state_file + ".tmp", "w") as f:
            json.dump({"loader": loader.state_dict(), "taken": taken}, f)
        os.replace(state_file + ".tmp", state_file)
        os.kill(os.getpid(), 9)  # preempted: no cleanup, no exit handlers
"""


def test_a_killed_job_resumes_in_a_new_process(datasets, tmp_path):
    path = os.fspath(datasets["shard"])
    state_file = tmp_path / "checkpoint.json"
    child = subprocess.run([sys.executable, "-c", CHILD, path, os.fspath(state_file), "5"],
                           env=os.environ, capture_output=True, check=False)
    assert child.returncode == -9, child.stderr.decode()
    checkpoint = json.loads(state_file.read_text())
    rest = indices(make(path, resume_from=checkpoint["loader"]).batches())
    assert checkpoint["taken"] + rest == indices(make(path).batches())


@pytest.mark.parametrize("stop_after", [0, 5, 17, 18, 30, 53])
def test_the_documented_training_loop_resumes_across_epochs(datasets, stop_after):
    """docs/python.md's loop, 3 epochs of 18 steps, checkpointed after step `stop_after` and
    restarted: the records seen, step by step, are those of a run never interrupted."""
    path = datasets["shard"]

    def run(loader, budget, seen):
        for epoch in range(loader.epoch, 3):
            loader.set_epoch(epoch)
            for batch in loader.batches():
                seen.append((epoch, [int(i) for i in batch.indices]))
                if len(seen) == budget:
                    return loader.state_dict()
        return None

    whole = []
    run(make(path), None, whole)
    assert len(whole) == 54
    seen = []
    checkpoint = run(make(path), stop_after, seen) if stop_after else make(path).state_dict()
    checkpoint = json.loads(json.dumps(checkpoint))
    restarted = make(path)
    restarted.load_state_dict(checkpoint)
    run(restarted, None, seen)
    assert seen == whole


DDP_RANK = r"""
import json, sys
import torch, torch.distributed as dist
import packrec
path, out, world, rank, store, stop, resume = sys.argv[1:8]
world, rank, stop = int(world), int(rank), int(stop)
dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
state = json.load(open(resume)) if resume != "-" else None
loader = packrec.Loader(path, batch_size=12 // world, rank=rank, world_size=world, threads=1,
                        transform="none", seed=4, output="numpy", resume_from=state)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))
steps = []
for n, batch in enumerate(loader.batches()):
    labels = torch.from_numpy(batch.labels).float().view(-1, 1)
    model(labels).sum().backward()  # gradients all-reduced: the ranks stay in lock step
    mine = torch.from_numpy(batch.indices.astype("int64"))
    parts = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(parts, mine)
    steps.append([int(i) for part in parts for i in part])  # the global batch, in rank order
    if n + 1 == stop:
        break
if rank == 0:
    json.dump({"steps": steps, "state": loader.state_dict()}, open(out, "w"))
dist.destroy_process_group()
"""


def run_ddp(path, tmp_path, world, stop, resume_file=None):
    # The ranks meet through a file of their own, not a TCP port: a free port picked here could be
    # taken by another test before rank 0 listens on it.
    store = tmp_path / f"store-{world}-{stop}"
    out = tmp_path / f"ddp-{world}-{stop}.json"
    ranks = [subprocess.Popen([sys.executable, "-c", DDP_RANK, os.fspath(path), os.fspath(out),
                               str(world), str(rank), os.fspath(store), str(stop),
                               os.fspath(resume_file) if resume_file else "-"],
                              env=os.environ, stderr=subprocess.PIPE)
             for rank in range(world)]
    for process in ranks:
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err.decode()
    return json.loads(out.read_text())


def test_torch_distributed_job_resumed_on_another_world_size(datasets, tmp_path):
    """Real torch.distributed (gloo) ranks: 2 ranks take 4 global batches of 12 and checkpoint;
    the job restarts on 4 ranks (3 each) and finishes the epoch. The global batches are those of
    one uninterrupted process."""
    path = datasets["shard"]
    reference = [[int(i) for i in batch.indices]
                 for batch in make(path, batch_size=12).batches()]  # 10 global batches
    first = run_ddp(path, tmp_path, world=2, stop=4)
    assert first["steps"] == reference[:4]
    assert first["state"]["position"] == 48 and first["state"]["world_size"] == 2
    checkpoint = tmp_path / "checkpoint.json"
    checkpoint.write_text(json.dumps(first["state"]))
    second = run_ddp(path, tmp_path, world=4, stop=0, resume_file=checkpoint)
    assert first["steps"] + second["steps"] == reference
