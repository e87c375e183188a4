"""packrec.Loader: the C++ loader's batches in Python, without a copy."""
import os
import shutil
import struct
import subprocess
import tracemalloc

import numpy
import pytest
import torch

import packrec
from conftest import flip_payload_byte
from packrec import errors


def read_dump(path):
    """The batches packrec_dump_batches wrote: [(images N x H x W x 3, labels, indices)]."""
    data = path.read_bytes()
    batches, at = [], 0
    while at < len(data):
        n, h, w = struct.unpack_from("<3I", data, at)
        at += 12
        images = numpy.frombuffer(data, numpy.uint8, n * h * w * 3, at).reshape(n, h, w, 3)
        at += images.nbytes
        labels = numpy.frombuffer(data, numpy.int64, n, at)
        at += labels.nbytes
        indices = numpy.frombuffer(data, numpy.uint64, n, at)
        at += indices.nbytes
        batches.append((images, labels, indices))
    return batches


@pytest.mark.parametrize("fmt", ["shard", "lmdb", "hdf5"])
@pytest.mark.parametrize("transform", ["train", "eval"])
def test_tensors_equal_the_cpp_loaders_batches(tmp_path, datasets, dump_tool, fmt, transform):
    dump = tmp_path / "batches.bin"
    # The C++ side on 1 thread, Python on 2: batches do not depend on the thread count.
    subprocess.run([dump_tool, os.fspath(datasets[fmt]), os.fspath(dump), "16", "1", transform,
                    "4", "1", "64"], check=True)
    expected = read_dump(dump)
    loader = packrec.Loader(datasets[fmt], batch_size=16, threads=2, transform=transform, seed=4,
                            size=64)
    loader.set_epoch(1)
    got = list(loader)
    assert len(got) == len(expected) == len(loader) == 8
    for (images, labels), (want_images, want_labels, _) in zip(got, expected):
        assert isinstance(images, torch.Tensor) and images.dtype == torch.uint8
        assert images.shape == (len(want_labels), 64, 64, 3)
        assert torch.equal(images, torch.from_numpy(want_images.copy()))
        assert torch.equal(labels, torch.from_numpy(want_labels.copy()))


def test_batches_are_zero_copy_views_of_the_loaders_buffers(datasets):
    loader = packrec.Loader(datasets["shard"], batch_size=20, threads=2, size=96)
    batch_bytes = 20 * 96 * 96 * 3
    for batch in loader.batches():
        images, labels = loader._convert(batch)
        assert images.data_ptr() == batch.address  # the tensor is the loader's buffer
        assert batch.images.ctypes.data == batch.address
        assert images.is_contiguous() and images.shape == (len(batch), 96, 96, 3)

    # tracemalloc sees NumPy's data allocations: a copy of each batch shows up, views do not.
    tracemalloc.start()
    try:
        for images, labels in loader:
            pass
        _, peak_views = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for batch in loader.batches():
            numpy.array(batch.images)  # the copy this test would catch
        _, peak_copies = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_copies >= batch_bytes  # the measurement can see a batch-sized copy
    assert peak_views < batch_bytes / 10, peak_views


def test_a_kept_tensor_keeps_its_buffer(datasets):
    # prefetch 2: the pool would reuse buffers after two batches if tensors did not hold them.
    loader = packrec.Loader(datasets["shard"], batch_size=10, threads=2, prefetch=2, size=48,
                            shuffle=False)
    kept, snapshots = [], []
    for images, labels in loader:
        kept.append((images, labels))
        snapshots.append((images.clone(), labels.clone()))
    assert len(kept) == 12
    for (images, labels), (image_copy, label_copy) in zip(kept, snapshots):
        assert torch.equal(images, image_copy) and torch.equal(labels, label_copy)
    assert len({images.data_ptr() for images, _ in kept}) == 12  # twelve live buffers
    del kept, images, labels
    again = [images.data_ptr() for images, _ in loader]  # released ones go back to the pool
    # prefetch 2 in flight + the one the loop holds while the next is fetched + slack for timing
    assert len(set(again)) <= 4


def test_epochs_rank_and_order(datasets):
    path = datasets["lmdb"]

    def order(**options):
        options = {"threads": 2, **options}
        loader = packrec.Loader(path, batch_size=16, transform="none", seed=9, output="numpy",
                                **options)
        return [int(i) for batch in loader.batches() for i in batch.indices], loader

    epoch0, loader = order()
    assert sorted(epoch0) == list(range(120)) and epoch0 != list(range(120))
    assert order()[0] == epoch0                # a pure function of (seed, epoch, ...)
    assert order(threads=1)[0] == epoch0       # whatever the thread count
    epoch1 = [int(i) for batch in loader.batches() for i in batch.indices]  # iterating again
    assert loader.epoch == 2 and sorted(epoch1) == sorted(epoch0) and epoch1 != epoch0
    loader.set_epoch(0)
    assert [int(i) for batch in loader.batches() for i in batch.indices] == epoch0
    assert order(shuffle=False)[0] == list(range(120))

    ranks = [order(rank=r, world_size=2)[0] for r in range(2)]
    assert len(ranks[0]) == len(ranks[1]) == 60
    assert not set(ranks[0]) & set(ranks[1]) and sorted(ranks[0] + ranks[1]) == list(range(120))


def test_undecoded_numpy_and_normalized_outputs(datasets):
    ds = packrec.open(datasets["shard"])
    loader = packrec.Loader(ds, batch_size=50, transform="none", shuffle=False)
    encoded, labels = next(iter(loader))
    assert encoded[:3] == [ds[i][0] for i in range(3)] and labels.tolist()[:3] == [ds[i][1] for i in range(3)]

    plain = packrec.Loader(ds, batch_size=8, shuffle=False, size=32, output="numpy")
    images, labels = next(iter(plain))
    assert isinstance(images, numpy.ndarray) and images.shape == (8, 32, 32, 3)
    normalized = packrec.Loader(ds, batch_size=8, shuffle=False, size=32, normalize=True)
    tensor, _ = next(iter(normalized))
    assert tensor.shape == (8, 3, 32, 32) and tensor.dtype == torch.float32
    mean = numpy.array(packrec.IMAGENET_MEAN, "float32")
    std = numpy.array(packrec.IMAGENET_STD, "float32")
    want = ((images.astype("float32") / 255 - mean) / std).transpose(0, 3, 1, 2)
    numpy.testing.assert_allclose(tensor.numpy(), want, rtol=1e-5, atol=1e-5)
    as_numpy, _ = next(iter(packrec.Loader(ds, batch_size=8, shuffle=False, size=32,
                                           normalize=True, output="numpy")))
    numpy.testing.assert_allclose(as_numpy, want, rtol=1e-5, atol=1e-5)


def test_a_bad_record_raises_with_its_index_or_is_skipped(tmp_path, datasets):
    copy = tmp_path / "damaged.pkr"
    shutil.copytree(datasets["shard"], copy)
    victim = 37
    flip_payload_byte(copy, victim)
    ds = packrec.open(copy)
    with pytest.raises(errors.CorruptionError) as raised:
        for _ in packrec.Loader(ds, batch_size=16, shuffle=False, size=32):
            pass
    assert raised.value.record_index == victim
    assert raised.value.path is not None and raised.value.path.startswith(str(copy))
    assert f"record {victim}" in str(raised.value) and ds[victim + 1][0]
    skipping = packrec.Loader(ds, batch_size=16, shuffle=False, size=32, on_bad_record="skip")
    assert sum(len(labels) for _, labels in skipping) == 119
    assert skipping.stats()["skipped"] == 1


def test_bad_options_are_named(datasets):
    path = datasets["shard"]
    with pytest.raises(errors.InvalidArgumentError, match="batch_size"):
        packrec.Loader(path, batch_size=0)
    with pytest.raises(ValueError, match="shuffle must be one of"):
        packrec.Loader(path, shuffle="sometimes")
    with pytest.raises(ValueError, match="transform must be one of"):
        packrec.Loader(path, transform="flip")
    with pytest.raises(errors.InvalidArgumentError, match="device"):
        packrec.Loader(path, device="tpu")
    with pytest.raises(errors.InvalidArgumentError, match="rank"):
        packrec.Loader(path, rank=2, world_size=2)
    if not packrec.gpu_available()[0]:
        with pytest.raises(errors.NotSupportedError, match="cuda"):
            packrec.Loader(path, device="cuda")


@pytest.mark.skipif(not packrec.gpu_available()[0], reason="no CUDA device: " + packrec.gpu_available()[1])
def test_device_cuda_tensors_equal_the_host_batches(datasets):
    host = packrec.Loader(datasets["shard"], batch_size=16, seed=2, size=64)
    gpu = packrec.Loader(datasets["shard"], batch_size=16, seed=2, size=64, device="cuda")
    normalized = packrec.Loader(datasets["shard"], batch_size=16, seed=2, size=64, device="cuda",
                                normalize=True)
    for (h, hl), (g, gl), (n, _) in zip(host, gpu, normalized):
        assert g.is_cuda and g.dtype == torch.uint8 and gl.is_cuda
        assert torch.equal(g.cpu(), h) and torch.equal(gl.cpu(), hl)
        assert n.is_cuda and n.shape == (len(hl), 3, 64, 64)
        torch.testing.assert_close(n.cpu(), packrec.normalize(h), rtol=1e-4, atol=1e-4)
