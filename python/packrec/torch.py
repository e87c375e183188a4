"""packrec datasets for code that keeps its own torch DataLoader, samplers and transforms.

    from packrec.torch import Dataset
    train = Dataset("data.pkr", transform=torchvision_transforms)   # like ImageFolder
    loader = torch.utils.data.DataLoader(train, batch_size=256, shuffle=True, num_workers=8)

Safe with num_workers > 0 under fork and spawn: the dataset holds only its path until it is first
read in a process, and a process that finds a reader opened by another one (a forked worker
inheriting its parent's) opens its own. An LMDB environment or HDF5 handle is never used across a
fork, and the inherited one is never closed in the child (closing it there would touch state the
parent still uses); pickling (spawn) carries only the path and options.
"""
import os

import torch.utils.data

import packrec

# Readers inherited through fork(): kept referenced so that the child never runs their destructors.
_inherited_after_fork = []


class Dataset(torch.utils.data.Dataset):
    """Map-style dataset: ds[i] -> (image, label), as torchvision's ImageFolder.

    decode: "pil" (a PIL RGB image, for torchvision transforms), "numpy" (H x W x 3 uint8),
    "tensor" (3 x H x W uint8 tensor, as torchvision.io.decode_jpeg) or "bytes" (the encoded
    image as stored). Decoding is packrec's (libjpeg-turbo), with the GIL released.
    transform / target_transform: applied to the image / label, as torchvision datasets do.
    """

    def __init__(self, path, transform=None, target_transform=None, decode="pil",
                 verify_checksums=True):
        self.path = os.fspath(path)
        self.transform = transform
        self.target_transform = target_transform
        self.decode = packrec._choice("decode", decode, ("pil", "numpy", "tensor", "bytes"))
        self.verify_checksums = verify_checksums
        # Read the facts once and close: the process that reads records opens its own reader.
        probe = packrec.open(self.path, verify_checksums)
        info = probe.info()
        del probe
        self._length = info["record_count"]
        self.classes = info["classes"]
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
        self.format = info["format"]
        self._reader = None
        self._reader_pid = None

    def __len__(self):
        return self._length

    @property
    def reader(self):
        """This process's packrec dataset, opened on first use in each process."""
        pid = os.getpid()
        if self._reader is not None and self._reader_pid != pid:
            _inherited_after_fork.append(self._reader)
            self._reader = None
        if self._reader is None:
            self._reader = packrec.open(self.path, self.verify_checksums)
            self._reader_pid = pid
        return self._reader

    def __getitem__(self, index):
        data, label, _ = self.reader[index]
        image = self._decode(data)
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return image, label

    def key(self, index):
        """Record `index`'s key: its path relative to the source tree."""
        return self.reader[index][2]

    def _decode(self, data):
        if self.decode == "bytes":
            return data
        pixels = packrec.decode(data)
        if self.decode == "numpy":
            return pixels
        if self.decode == "tensor":
            return torch.from_numpy(pixels).permute(2, 0, 1)
        from PIL import Image  # noqa: PLC0415 - only this mode needs Pillow

        return Image.fromarray(pixels, mode="RGB")

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_reader"] = None
        state["_reader_pid"] = None
        return state
