"""packrec.Loader's state_dict / load_state_dict / resume_from on the real datasets of conftest:
stop, save, resume equals an uninterrupted epoch (in this process and across a killed one),
elastic world sizes, exact epochs, refusals."""
import json
import os
import subprocess
import sys

import numpy
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
# The DDP model (its reducer holds the process group) and the loader go before the group:
# left to the interpreter's exit, torch's gloo threads were torn down in an order that
# aborted a rank once in CI ("terminate called without an active exception").
del model, loader
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


def test_a_subset_is_read_in_order_shuffled_and_resumed_exactly(datasets):
    path = datasets["shard"]
    subset = list(range(0, 120, 3))[::-1]  # a "validation fold", in an order of its own
    ordered = make(path, shuffle=False, indices=subset)
    assert indices(ordered.batches()) == subset
    whole_loader = make(path, indices=subset)
    whole_loader.set_epoch(1)
    whole = indices(whole_loader.batches())
    assert sorted(whole) == sorted(subset) and whole != subset
    for k in (0, 2, len(whole_loader)):
        first = make(path, indices=subset)
        first.set_epoch(1)
        it = first.batches()
        taken = [int(i) for _ in range(k) for i in next(it).indices]
        rest = indices(make(path, indices=subset, resume_from=first.state_dict()).batches())
        assert taken + rest == whole, k
    # A state of this subset resumes no other selection, nor the whole dataset.
    state = make(path, indices=subset).state_dict()
    with pytest.raises(errors.InvalidArgumentError, match="subset/weights"):
        make(path, indices=subset[1:], resume_from=state)
    with pytest.raises(errors.InvalidArgumentError, match="subset/weights"):
        make(path, resume_from=state)
    with pytest.raises(errors.InvalidArgumentError, match="past the dataset's 120 records"):
        make(path, indices=[5, 120])
    with pytest.raises(errors.InvalidArgumentError, match="shards"):
        make(path, indices=[1, 2], shuffle="shards", last_batch="drop")


def test_weights_draw_as_weighted_random_sampler_and_resume_exactly(datasets):
    path = datasets["shard"]
    labels = packrec.open(path).labels
    # Class balancing as in the torch recipe: weight = 1 / class frequency, here with class 0
    # left out entirely (weight 0) and class 1 three times as likely as each other class.
    counts = numpy.bincount(labels)
    weights = numpy.array([0.0 if label == 0 else (3.0 if label == 1 else 1.0) / counts[label]
                           for label in labels])
    loader = make(path, weights=weights, num_samples=2000, batch_size=50)
    assert len(loader) == 40 and loader.records_per_epoch == 2000
    drawn = indices(loader.batches())
    assert len(drawn) == 2000
    drawn_labels = labels[drawn]
    assert (drawn_labels != 0).all()
    share = (drawn_labels == 1).mean()
    expected = 3 / (3 + (len(counts) - 2))
    assert abs(share - expected) < 0.05, (share, expected)
    # A pure function of (seed, epoch, position): the same draws again, other ones next epoch.
    again = make(path, weights=weights, num_samples=2000, batch_size=50)
    assert indices(again.batches()) == drawn
    assert indices(again.batches()) != drawn  # epoch 1
    first = make(path, weights=weights, num_samples=2000, batch_size=50)
    it = first.batches()
    taken = [int(i) for _ in range(13) for i in next(it).indices]
    rest = indices(make(path, weights=weights, num_samples=2000, batch_size=50,
                        resume_from=first.state_dict()).batches())
    assert taken + rest == drawn
    # Weights over a subset: one per entry.
    subset = [i for i in range(120) if labels[i] == 2]
    only = indices(make(path, indices=subset, weights=[1.0] * len(subset)).batches())
    assert set(only) <= set(subset) and len(only) == len(subset)
    for bad, match in [([1.0] * 5, "one per record is 120"), ([-1.0] + [1.0] * 119, "finite and >= 0"),
                       ([0.0] * 120, "at least one must be above 0")]:
        with pytest.raises(errors.InvalidArgumentError, match=match):
            make(path, weights=bad)
    with pytest.raises(errors.InvalidArgumentError, match="shuffle 'global'"):
        make(path, weights=[1.0] * 120, shuffle=False)
    with pytest.raises(errors.InvalidArgumentError, match="needs weights or mix"):
        make(path, num_samples=10)


def test_after_a_break_state_dict_describes_the_next_iteration(datasets):
    path = datasets["shard"]
    whole = indices(make(path).batches())
    loader = make(path)
    taken = []
    for n, batch in enumerate(loader.batches()):
        taken += [int(i) for i in batch.indices]
        if n == 4:
            break
    state = loader.state_dict()
    assert (state["epoch"], state["position"]) == (0, 35)
    resumed = indices(make(path, resume_from=state).batches())
    rest = indices(loader.batches())  # iterating again continues, as the state says
    assert rest == resumed and taken + rest == whole
    assert loader.state_dict()["epoch"] == 1 and loader.state_dict()["position"] == 0
    # A break after the last batch: the next iteration is the next epoch, not an empty one.
    for batch in loader.batches():
        last = batch
    assert last is not None
    loader.set_epoch(3)
    for n, batch in enumerate(loader.batches()):
        if n == len(loader) - 1:
            break
    assert loader.state_dict()["epoch"] == 4
    assert len(indices(loader.batches())) == 120


def test_the_default_transform_follows_shuffle(datasets):
    path = datasets["shard"]
    assert packrec.Loader(path, threads=1).transform == "train"
    assert packrec.Loader(path, threads=1, shuffle=False).transform == "eval"
    assert packrec.Loader(path, threads=1, shuffle=False, transform="train").transform == "train"


def test_mixing_datasets_in_set_proportions_is_deterministic_and_resumes_exactly(datasets, tmp_path):
    first = datasets["shard"]
    packrec.synth(tmp_path / "other-tree", classes=2, per_class=15, seed=9)
    second = tmp_path / "other.pkr"
    packrec.convert(tmp_path / "other-tree", second)
    both = packrec.open([first, second])
    assert both.part_sizes == [120, 30] and len(both) == 150 and both.format == "concat"
    assert both[120][2] == packrec.open(second)[0][2] and both[-1][2] == packrec.open(second)[-1][2]
    assert both.labels.tolist() == packrec.open(first).labels.tolist() + packrec.open(second).labels.tolist()
    # A list of datasets without proportions: every record of each once an epoch (ConcatDataset).
    assert sorted(indices(make([first, second]).batches())) == list(range(150))
    # Proportions: dataset k with probability p_k / sum, whatever its size.
    mixed = make([first, second], mix=[0.2, 0.8], num_samples=1400, batch_size=50)
    drawn = indices(mixed.batches())
    assert len(drawn) == 1400 and len(mixed) == 28
    share = sum(i >= 120 for i in drawn) / len(drawn)
    assert abs(share - 0.8) < 0.05, share
    assert indices(make({os.fspath(first): 0.2, os.fspath(second): 0.8}, num_samples=1400,
                        batch_size=50).batches()) == drawn  # the same mix, given as a dict
    stopped = make([first, second], mix=[0.2, 0.8], num_samples=1400, batch_size=50)
    it = stopped.batches()
    taken = [int(i) for _ in range(11) for i in next(it).indices]
    state = stopped.state_dict()
    rest = indices(make([first, second], mix=[0.2, 0.8], num_samples=1400, batch_size=50,
                        resume_from=state).batches())
    assert taken + rest == drawn
    # Another mix, or the datasets in another order, is another sequence: refused.
    with pytest.raises(errors.InvalidArgumentError, match="subset/weights"):
        make([first, second], mix=[0.5, 0.5], num_samples=1400, batch_size=50, resume_from=state)
    with pytest.raises(errors.InvalidArgumentError, match="fingerprint"):
        make([second, first], mix=[0.8, 0.2], num_samples=1400, batch_size=50, resume_from=state)
    with pytest.raises(errors.InvalidArgumentError, match="2 proportions for 1 datasets"):
        make(first, mix=[0.5, 0.5])
    with pytest.raises(errors.InvalidArgumentError, match="at least one must be above 0"):
        make([first, second], mix=[0, 0])
