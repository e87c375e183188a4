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
