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


def _to_torch(value):
    """A field value as a training step takes it: numpy arrays as tensors (int64 stays int64,
    float32 float32), the rest (str, parsed JSON, bytes, None) as it is."""
    if hasattr(value, "dtype"):
        return torch.from_numpy(value)
    return value


class Dataset(torch.utils.data.Dataset):
    """Map-style dataset: ds[i] -> (image, target), as torchvision's ImageFolder.

    decode: "pil" (a PIL RGB image, for torchvision transforms), "numpy" (H x W x 3 uint8),
    "tensor" (3 x H x W uint8 tensor, as torchvision.io.decode_jpeg) or "bytes" (the encoded
    image as stored). Decoding is packrec's (libjpeg-turbo), with the GIL released.
    target: what comes beside the image: "label" (the class index, as ImageFolder), a field
    name (its value: numbers as a tensor of shape (N, *shape), text as str, JSON parsed), a tuple
    of names (a dict of them, e.g. ("boxes", "labels") for torchvision's detection models), or a
    callable given the whole record (packrec Dataset.sample's dict) that returns the target.
    transform / target_transform: applied to the image / target, as torchvision datasets do.
    cache / cache_size / timeout: for a dataset at a URL, as packrec.open takes them; every
    DataLoader worker reads through the same cache.
    """

    def __init__(self, path, transform=None, target_transform=None, decode="pil",
                 verify_checksums=True, target="label", cache=None, cache_size=None, timeout=None):
        self.path = os.fspath(path)
        # A dataset at a URL: packrec.open's cache, cache_size and timeout, for every worker.
        self._remote = {"cache": cache, "cache_size": cache_size, "timeout": timeout}
        self.transform = transform
        self.target_transform = target_transform
        self.decode = packrec._choice("decode", decode, ("pil", "numpy", "tensor", "bytes"))
        self.verify_checksums = verify_checksums
        # Read the facts once and close: the process that reads records opens its own reader.
        probe = packrec.open(self.path, verify_checksums, **self._remote)
        info = probe.info()
        self.fields = info["fields"]
        self.target = self._check_target(target, [field["name"] for field in self.fields])
        # ImageFolder's: every sample's class index, read from the index (no image bytes).
        self.targets = probe.labels.tolist()
        del probe
        self._length = info["record_count"]
        self.classes = info["classes"]
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
        self.format = info["format"]
        self._samples = None
        self._reader = None
        self._reader_pid = None

    def __len__(self):
        return self._length

    @property
    def root(self):
        """The dataset's path (ImageFolder's root)."""
        return self.path

    @property
    def imgs(self):
        """ImageFolder's alias of samples."""
        return self.samples

    def find_classes(self, directory=None):
        """ImageFolder's (classes, class_to_idx): the dataset's, fixed when it was converted
        (`directory` is accepted for the signature's sake and must be None or this root)."""
        if directory is not None and os.fspath(directory) != self.path:
            raise ValueError(f"a packrec dataset's classes are its own; {directory!r} is not {self.path!r}")
        return list(self.classes), dict(self.class_to_idx)

    def __repr__(self):
        lines = [f"Number of datapoints: {self._length}", f"Root location: {self.path}",
                 f"Format: {self.format}, {len(self.classes)} classes, decode={self.decode!r}, "
                 f"target={self.target!r}"]
        if self.fields:
            lines.append("Fields: " + ", ".join(field["name"] for field in self.fields))
        for name, value in (("Transform", self.transform), ("Target transform", self.target_transform)):
            if value is not None:
                lines.append(f"{name}: " + repr(value).replace("\n", "\n    "))
        return "packrec.torch.Dataset\n" + "\n".join("    " + line for line in lines)

    @property
    def reader(self):
        """This process's packrec dataset, opened on first use in each process."""
        pid = os.getpid()
        if self._reader is not None and self._reader_pid != pid:
            _inherited_after_fork.append(self._reader)
            self._reader = None
        if self._reader is None:
            self._reader = packrec.open(self.path, self.verify_checksums, **self._remote)
            self._reader_pid = pid
        return self._reader

    @staticmethod
    def _check_target(target, names):
        if callable(target):
            return target
        wanted = [target] if isinstance(target, str) else list(target)
        if not wanted or not all(isinstance(name, str) for name in wanted):
            raise TypeError(f"target must be 'label', a field name, a tuple of names or a callable, not {target!r}")
        for name in wanted:
            if name != "label" and name not in names:
                raise ValueError(f"target {name!r} is not a field of the dataset (its fields: "
                                 f"{', '.join(names) if names else 'none'}; or 'label')")
        return target if isinstance(target, str) else tuple(wanted)

    @property
    def samples(self):
        """ImageFolder's (path, class index) of every record; the path is the dataset path joined
        with the record's key (read once, on first use)."""
        if self._samples is None:
            self._samples = [(os.path.join(self.path, self.reader._item(i)[2]), label)
                             for i, label in enumerate(self.targets)]
        return self._samples

    def __getitem__(self, index):
        if isinstance(index, slice):  # ds[a:b] -> a list of (image, target), as a list would
            return [self[i] for i in range(*index.indices(self._length))]
        if self.target == "label":
            data, target, _ = self.reader._item(index)
        else:
            record = self.reader.sample(index)
            data = record["image"]
            if callable(self.target):
                target = self.target(record)
            elif isinstance(self.target, str):
                target = _to_torch(record[self.target])
            else:
                target = {name: _to_torch(record[name]) for name in self.target}
        image = self._decode(data)
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def key(self, index):
        """Record `index`'s key: its path relative to the source tree."""
        return self.reader._item(index)[2]

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
