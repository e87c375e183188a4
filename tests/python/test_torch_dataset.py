"""packrec.torch.Dataset under torch's DataLoader with worker processes (fork and spawn)."""
import hashlib
import os

import numpy
import pytest
import torch
import torch.utils.data

import packrec
from packrec.torch import Dataset


class Recording(Dataset):
    """Each item also says which process read it and which process opened that reader."""

    def __getitem__(self, index):
        image, label = super().__getitem__(index)
        return hashlib.sha1(image).hexdigest(), label, os.getpid(), self._reader_pid


def collate(items):
    return items


@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("fmt", ["shard", "lmdb", "hdf5"])
def test_two_workers_read_every_record_exactly_once(datasets, tree_files, context, fmt):
    ds = Recording(datasets[fmt], decode="bytes")
    ds[0]  # the parent has a reader open now: forked workers must not use it
    parent = os.getpid()
    loader = torch.utils.data.DataLoader(ds, batch_size=7, shuffle=True, num_workers=2,
                                         multiprocessing_context=context, collate_fn=collate)
    items = [item for batch in loader for item in batch]
    want = sorted((hashlib.sha1(data).hexdigest(), label) for data, label in tree_files.values())
    assert sorted((digest, label) for digest, label, _, _ in items) == want  # each exactly once
    workers = {pid for _, _, pid, _ in items}
    assert len(workers) == 2 and parent not in workers
    assert all(opener == reader for _, _, reader, opener in items)  # opened in the worker itself


def test_drop_in_for_image_folder(tree, datasets):
    torchvision = pytest.importorskip("torchvision")
    folder = torchvision.datasets.ImageFolder(tree)
    ds = Dataset(datasets["shard"])
    assert len(ds) == len(folder) and ds.classes == folder.classes
    assert ds.class_to_idx == folder.class_to_idx
    for i in (0, 31, len(ds) - 1):
        image, label = ds[i]
        want_image, want_label = folder[i]
        assert label == want_label and image.size == want_image.size and image.mode == "RGB"
        # Both decode with libjpeg-turbo (Pillow's and ours) with the same IDCT: the same pixels
        # up to rounding of the upsampling.
        diff = numpy.abs(numpy.asarray(image, "int16") - numpy.asarray(want_image, "int16"))
        assert diff.mean() < 2.0
    transform = torchvision.transforms.Compose([torchvision.transforms.CenterCrop(32),
                                                torchvision.transforms.ToTensor()])
    image, _ = Dataset(datasets["lmdb"], transform=transform, target_transform=str)[3]
    assert image.shape == (3, 32, 32)
    tensor, label = Dataset(datasets["hdf5"], decode="tensor", target_transform=str)[3]
    assert tensor.dtype == torch.uint8 and tensor.shape[0] == 3 and label == str(ds[3][1])
    pixels, _ = Dataset(datasets["hdf5"], decode="numpy")[3]
    assert torch.equal(tensor, torch.from_numpy(pixels).permute(2, 0, 1))
    assert ds.key(0) == packrec.open(datasets["shard"])[0][2]
    with pytest.raises(ValueError, match="decode must be one of"):
        Dataset(datasets["shard"], decode="jpeg")


def test_image_folder_attributes_samplers_and_splits_work_as_with_image_folder(tree, datasets):
    torchvision = pytest.importorskip("torchvision")
    folder = torchvision.datasets.ImageFolder(tree)
    ds = Dataset(datasets["shard"])
    assert ds.targets == folder.targets
    assert [label for _, label in ds.samples] == [label for _, label in folder.samples]
    # The keys are the paths below the tree: the samples name the same files under another root.
    assert [os.path.relpath(p, ds.root) for p, _ in ds.imgs] == \
        [os.path.relpath(p, tree) for p, _ in folder.imgs]
    assert ds.root == os.fspath(datasets["shard"])
    assert ds.find_classes() == folder.find_classes(tree)
    # Class balancing with torch's own sampler, from targets alone (no image read).
    counts = numpy.bincount(ds.targets)
    weights = [1.0 / counts[t] for t in ds.targets]
    sampler = torch.utils.data.WeightedRandomSampler(weights, num_samples=3000,
                                                     generator=torch.Generator().manual_seed(0))
    drawn = numpy.bincount([ds.targets[i] for i in sampler], minlength=len(counts))
    assert (abs(drawn / 3000 - 1 / len(counts)) < 0.05).all(), drawn
    # A stratified split by hand (scikit-learn's train_test_split(stratify=ds.targets) takes the
    # same list), then Subset, as with ImageFolder.
    val = [i for c in range(len(counts)) for i in numpy.flatnonzero(numpy.array(ds.targets) == c)[:5]]
    subset = torch.utils.data.Subset(ds, val)
    assert [label for _, label in subset] == [ds.targets[i] for i in val]
    # Slices, as a list's, and a repr that says what it is.
    assert [label for _, label in ds[2:6]] == ds.targets[2:6]
    assert len(ds[::-1]) == len(ds)
    text = repr(ds)
    assert "Number of datapoints: 120" in text and f"Root location: {ds.root}" in text
    plain = packrec.open(datasets["shard"])
    assert "records=120" in repr(plain) and "format='shard'" in repr(plain)
    assert [record[2] for record in plain[1:4]] == [plain[i][2] for i in (1, 2, 3)]
    assert isinstance(plain.labels, numpy.ndarray) and plain.labels.tolist() == ds.targets
