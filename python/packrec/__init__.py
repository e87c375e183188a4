"""packrec: packed image datasets that keep GPUs fed.

    import packrec
    packrec.convert("tree/", "data.pkr")                  # an image folder -> shard dataset
    ds = packrec.open("data.pkr")                         # shard, LMDB or HDF5
    data, label, key = ds[42]                             # the encoded image, as stored
    for images, labels in packrec.Loader("data.pkr", batch_size=256, transform="train"):
        ...                                               # N x 224 x 224 x 3 uint8 tensors

packrec.torch.Dataset is a map-style torch Dataset for code that keeps its own DataLoader.
Errors are packrec.Error subclasses (packrec.errors) carrying the C++ message and the record index.
"""
import json
import numbers
import os
import re
import sys

from . import _packrec, errors
from ._packrec import Batch, Dataset, GpuBatch, __version__, decode, gpu_available, image_info
from ._packrec import max_image_pixels, set_max_image_pixels
from ._packrec import _convert, _Loader, _merge
from .errors import Error

__all__ = ["open", "Record", "convert", "formats", "source_formats", "merge", "synth", "decode", "image_info", "Loader", "Dataset", "Batch", "Error",
           "max_image_pixels", "set_max_image_pixels", "diagnose",
           "errors", "gpu_available", "__version__"]


def __getattr__(name):
    # packrec.diagnose is a callable module (packrec/diagnose.py), imported on first use: imported
    # here up front, `python -m packrec.diagnose` would find it loaded before it runs and warn.
    if name == "diagnose":
        import importlib
        return importlib.import_module(".diagnose", __name__)
    raise AttributeError(f"module 'packrec' has no attribute {name!r}")

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class Record(tuple):
    """ds[i] of a dataset with fields: still the tuple (bytes, label, key), so `data, label, key
    = ds[i]` keeps working, with each field by name (rec["caption"]) and as an attribute
    (rec.caption) when the name is an identifier; rec.fields is the dict of them (None where the
    record lacks one). image, label and key are attributes too."""

    def __new__(cls, values, fields):
        record = super().__new__(cls, values)
        record.fields = dict(fields)
        return record

    def __getnewargs__(self):
        return tuple(self), self.fields

    image = property(lambda self: tuple.__getitem__(self, 0))
    label = property(lambda self: tuple.__getitem__(self, 1))
    key = property(lambda self: tuple.__getitem__(self, 2))

    def __getitem__(self, item):
        if isinstance(item, str):
            return self.fields[item]
        return tuple.__getitem__(self, item)

    def __getattr__(self, name):
        fields = self.__dict__.get("fields", {})
        if name in fields:
            return fields[name]
        raise AttributeError(f"record has no field {name!r} (its fields: {', '.join(fields) or 'none'})")

    def __repr__(self):
        return f"Record(key={self.key!r}, label={self.label!r}, fields={sorted(self.fields)})"


def open(path, verify_checksums=True, cache=None, cache_size=None, timeout=None):  # noqa: A001
    """Opens the dataset at `path` (shard directory, LMDB environment or HDF5 file, or a shard
    dataset at an https:// or s3:// URL), or several given as a list: one dataset of their
    records in order (torch's ConcatDataset; ds.paths and ds.part_sizes say where each starts).

    len(ds), ds[i] -> (bytes, label, key) with negative indices, iteration, ds.record(i),
    ds.info(), ds.verify(deep=False). verify_checksums=False skips the per-read xxHash check.

    URLs only (docs/remote.md): cache, a local directory shared by every process that names it
    (DataLoader workers, ranks), holding at most cache_size bytes (an int or '50GiB'; required
    with cache); timeout, seconds without an answer before a request is tried again. Unset, the
    PACKREC_CACHE_DIR / PACKREC_CACHE_SIZE / PACKREC_REMOTE_TIMEOUT variables apply. The dataset
    pickles with them, so workers share the cache.
    """
    paths = [os.fspath(p) for p in path] if isinstance(path, (list, tuple)) else [os.fspath(path)]
    if cache is None and cache_size is None and timeout is None:
        return Dataset(paths, verify_checksums)
    if cache is not None and cache_size is None:
        raise errors.InvalidArgumentError("cache needs cache_size (a byte count, or like '50GiB')")
    size = _size_bytes("cache_size", cache_size) if cache_size is not None else 0
    if isinstance(timeout, bool) or (timeout is not None and not (
            isinstance(timeout, numbers.Real) and timeout > 0)):
        raise errors.InvalidArgumentError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return Dataset(paths, verify_checksums, cache_dir=os.fspath(cache) if cache else "",
                   cache_size_bytes=size, timeout_seconds=float(timeout or 0))


def _choice(name, value, allowed):
    if value not in allowed:
        raise errors.InvalidArgumentError(
            f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


def _count(name, value, maximum=2**32 - 1):
    """A whole number 0..maximum for keyword `name`: the C++ signature behind it takes unsigned
    ints, and a negative or fractional value would end in pybind11's dump of that signature."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value <= maximum:
        raise errors.InvalidArgumentError(f"{name} must be a whole number from 0 to {maximum}, got {value!r}")
    return int(value)


_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(i?B?)\s*$", re.IGNORECASE)


def _size_bytes(name, value):
    """An int, or a size like '256MiB', '64M', '1G' (binary multiples, as the CLI takes them)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE.match(str(value))
    if not match:
        raise errors.InvalidArgumentError(f"{name} must be bytes or a size like '256MiB', got {value!r}")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[match.group(2).upper()]
    return int(match.group(1)) * scale


class _ProgressPrinter:
    """progress=True: on a terminal one line redrawn in place; elsewhere (a notebook's log, Slurm,
    CI) a whole line every `interval` seconds and the last one, as the CLI prints them. The ETA
    shows once it means something (3 s and 1% done)."""

    def __init__(self, stream=None, interval=10.0):
        self.stream = stream or sys.stderr
        self.terminal = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.interval = interval
        self.next_line_at = interval
        self.lines = 0

    def __call__(self, state):
        done, total, seconds = state["records_done"], state["records_total"], state["elapsed_seconds"]
        finished = total > 0 and done == total
        if not self.terminal:
            if (not finished and seconds < self.next_line_at) or (finished and not self.lines):
                return
            self.next_line_at = seconds + self.interval
        rate = done / seconds if seconds > 0 else 0
        mb_per_s = state["input_bytes"] / 1e6 / seconds if seconds > 0 else 0
        where, eta = str(done), ""
        if total > 0:
            percent = 100 * done // total
            where = f"[{percent}%] {done}/{total}"
            meaningful = seconds >= 3 and percent >= 1 and rate > 0
            eta = "  ETA " + (_duration((total - done) / rate) if meaningful else "--:--")
        line = f"{where} records  {rate:.0f} rec/s  {mb_per_s:.1f} MB/s  {_duration(seconds)} elapsed{eta}"
        if self.terminal:
            print("\r" + line, end="\n" if finished else "   ", file=self.stream, flush=True)
        else:
            print("packrec.convert: " + line, file=self.stream, flush=True)
        self.lines += 1


def _duration(seconds):
    total = int(seconds + 0.5)
    return f"{total // 60}:{total % 60:02d}"


def synth(out, classes=10, per_class=100, seed=0, width=400, height=350):
    """Writes a synthetic ImageNet-like tree of real JPEGs to `out` (str or path), as
    `packrec synth`; returns {files, bytes}."""
    return _packrec.synth(os.fspath(out), _count("classes", classes), _count("per_class", per_class),
                          _count("seed", seed, 2**64 - 1), _count("width", width),
                          _count("height", height))


def formats():
    """The formats convert writes, as the library's registry lists them: dicts with name, summary,
    suffixes, readable (packrec opens it; else an export for other tools), single_file and
    resumable. The first is the default."""
    return _packrec.formats()


def source_formats():
    """What convert's from_ takes: "auto" (detect it), then each kind of source by name."""
    return _packrec.source_formats()


def convert(source, output, format=None, *, shard_size="256MiB", align=64, compress=None,
            threads=0, shuffle=False, seed=None, on_error="fail", list_format="auto", root=None,
            resize_short=0, quality=0, overwrite=False, resume=False, lmdb_values="packrec",
            map_size=0, hdf5_layout="encoded", size=None, progress=None, part=None, from_="auto",
            image_field=None, label_field=None, key_field=None, caffe_raw="png", fields=None,
            drop_fields=None, annotations=None):
    """Packs an image folder (SRC/<class>/<file>), a list file, or another tool's container
    (WebDataset tars, a glob or brace pattern of them, TFRecord, RecordIO, MDS, a Caffe LMDB, a
    packrec dataset) into a dataset; `packrec convert`.

    format: a name from packrec.formats() (None: the one the output's name ends with, .pkr,
    .lmdb, .h5 or .hdf5, else the first, packrec's shard format; a name that says another
    format than the one given, or one file of an export such as .tar, is refused); the
    exports among them are for other tools' readers.
    from_: what source is, a name from packrec.source_formats() ("auto" detects it);
    image_field / label_field / key_field name the feature,
    column or member to read; caffe_raw: "png" or "raw" (docs/interop.md).
    fields / drop_fields: lists of field names to keep only / to leave out (`--fields`,
    `--drop-fields`; default: every field the source holds). annotations: a COCO instances JSON
    over the images of the folder `source` (`--annotations`, docs/formats/fields.md). The other options are the CLI's flags (docs/cli.md):
    shard_size ("256MiB" or bytes), align, compress ("zstd", "zstd:9", "deflate:4"), threads,
    shuffle / seed, on_error ("fail" or "skip": rejects listed in OUT/rejects.tsv), list_format,
    root, resize_short, quality, overwrite, lmdb_values ("packrec" or "caffe-datum"), map_size,
    hdf5_layout ("encoded" or "pixels") with size=(height, width).
    part=(index, count): convert only that part of the listing into
    output/part-IIIII-of-NNNNN.pkr|.lmdb|.h5 (`--part I/N`); join the parts with packrec.merge.
    A finished part is not redone (the result says already_complete); an interrupted one is.
    resume=True (`--resume`): continue the conversion into output that was killed or stopped by
    a write error from its last resume point (resumed_records says how many records were kept;
    a finished one: already_complete). docs/reliability.md.
    progress: a callable taking {records_done, records_total, input_bytes, elapsed_seconds},
    called after the first record and about every 200 ms; True prints progress to stderr (a live line on a terminal, else a line every 10 s). An
    exception it raises (or Ctrl-C) stops the conversion, removes the partial output and
    propagates. The GIL is released while converting.

    Returns {records_written, input_bytes, output_bytes, rejects: [(path, reason)],
    empty_classes, elapsed_seconds, already_complete, resumed_records}.
    """
    if format is None:
        format = ""  # the output's name says it (data.h5: hdf5, data.lmdb: lmdb), else shard
    else:
        _choice("format", format, tuple(f["name"] for f in _packrec.formats()))
    _choice("from_", from_, tuple(_packrec.source_formats()))
    _choice("caffe_raw", caffe_raw, ("png", "raw"))
    _choice("on_error", on_error, ("fail", "skip"))
    _choice("list_format", list_format, ("auto", "caffe", "mxnet"))
    _choice("lmdb_values", lmdb_values, ("packrec", "caffe-datum"))
    _choice("hdf5_layout", hdf5_layout, ("encoded", "pixels"))
    compression = "none" if compress is None else str(compress)  # the library checks it
    if progress is True:
        progress = _ProgressPrinter()
    elif progress is not None and not callable(progress):
        raise errors.InvalidArgumentError(f"progress must be a callable or True, got {progress!r}")
    if size is not None:
        size = (int(size[0]), int(size[1]))
    shuffle_seed = seed if seed is not None else (0 if shuffle else None)
    if part is not None:
        part = (int(part[0]), int(part[1]))
    for name, names in (("fields", fields), ("drop_fields", drop_fields)):
        if names is not None and (isinstance(names, str) or
                                  any(not isinstance(n, str) or "," in n for n in names)):
            raise errors.InvalidArgumentError(
                f"{name} must be a list of field names without commas, got {names!r}")
    return _convert(os.fspath(source), os.fspath(output), format, _size_bytes("shard_size", shard_size),
                    _count("align", align), compression, _count("threads", threads), shuffle_seed,
                    on_error, list_format, os.fspath(root) if root is not None else "",
                    _count("resize_short", resize_short), _count("quality", quality, 100),
                    bool(overwrite), bool(resume), lmdb_values, _size_bytes("map_size", map_size), hdf5_layout,
                    size, part,
                    {"from": from_, "image_field": image_field or "", "label_field": label_field or "",
                     "key_field": key_field or "", "caffe_raw": caffe_raw,
                     "fields": ",".join(fields or ()), "drop_fields": ",".join(drop_fields or ()),
                     "annotations": os.fspath(annotations) if annotations is not None else ""},
                    progress)


def merge(output, parts, *, overwrite=False, remove_parts=False):
    """Joins the parts of a partitioned conversion (convert(..., part=(i, n))) into `output`,
    record for record what one conversion writes; `packrec merge`. `parts`: part datasets or
    directories holding them. Refuses (InvalidInputError, naming the part and what differs)
    parts of different conversions, a missing or doubled part, before writing anything.

    Returns {parts, records, rejected, output_bytes, elapsed_seconds}.
    """
    if isinstance(parts, (str, os.PathLike)):
        parts = [parts]
    return _merge(os.fspath(output), [os.fspath(p) for p in parts], bool(overwrite), bool(remove_parts))


class _CudaArray:
    """A device array for torch.as_tensor: the tensor keeps this (and so the GpuBatch) alive."""

    __slots__ = ("_owner", "__cuda_array_interface__")

    def __init__(self, owner, interface):
        self._owner = owner
        self.__cuda_array_interface__ = interface


class Loader:
    """Batches of decoded, transformed images from any packrec dataset, decoded in C++ threads.

        loader = packrec.Loader("data.pkr", batch_size=256, threads=8, transform="train")
        for epoch in range(90):
            loader.set_epoch(epoch)          # as with DistributedSampler
            for images, labels in loader:    # images: N x H x W x 3 uint8 (NHWC), labels: int64
                ...

    Batches are torch tensors when torch is importable (output="numpy" for NumPy arrays), made
    without a copy over the loader's (pinned) buffers; a buffer is reused only after every
    tensor over it is gone. Each epoch has one global sequence, a pure function of (dataset,
    seed, epoch, shuffle), never of threads or timing, cut into global batches of
    batch_size x world_size; this rank's batch is its slice of each. Iterating again without
    set_epoch continues with the next epoch; a loop left early (break) and iterated again
    continues after the last batch it took, as state_dict() then says.

    Threads: packrec's calls release the GIL, and a daemon thread still inside one at interpreter
    exit is left to end with the process. torch 1.13 aborts the process (exit 134) when a daemon
    thread frees a tensor made by torch.from_numpy during exit, whoever made it; iterate a Loader
    in a non-daemon thread (or with output="numpy") if your program may exit while it runs.

    Checkpoints: state_dict() is where the batches taken so far end (a small dict of plain
    values); Loader(..., resume_from=state) or load_state_dict(state) continues with exactly the
    next batch, without reading anything before it, on any world_size whose
    batch_size x world_size keeps the global batch (see docs/loader.md). A state of another
    dataset, seed, shuffle or last_batch is refused (InvalidArgumentError).

    transform: "train" (RandomResizedCrop(size, scale, ratio) + horizontal flip), "eval"
    (resize the shorter side to `resize`, default size*256/224, center crop `size`) or "none"
    (no decode: batches are (list of encoded bytes, labels)). Default: "train" when shuffling,
    "eval" with shuffle=False, as a training and an evaluation loader are usually made.
    Batches are N x H x W x 3 uint8 (no copy); a torchvision model takes N x 3 x H x W float:
    normalize=True gives that (on the GPU with device="cuda").
    indices: read only these records (a train/val split, a fold), in this order unshuffled;
    shuffled, cut into batches and resumed like the whole dataset (not with shuffle="shards").
    weights: per record (per entry of indices), as torch's WeightedRandomSampler(weights,
    num_samples, replacement=True): each epoch is num_samples draws (default: one per entry),
    each a pure function of (seed, epoch, position), so state_dict() resumes them exactly; a
    record drawn twice in an epoch gets the same random crop. Needs shuffle=True.
    Several datasets: source as a list of paths reads them as one (every record once an epoch,
    as torch's ConcatDataset); mix=[p0, p1, ...] (or source as {path: proportion}) draws from
    dataset k with probability p_k / sum, then one of its records uniformly, num_samples draws an
    epoch (default: their records in total), as WebDataset's RandomMix and MosaicML's streams.
    Deterministic and resumable as one dataset; labels stay each dataset's own.
    shuffle: True ("global"), False ("none"), "windowed" (neighbouring windows of
    shuffle_window records, for slow storage) or "shards" (each rank reads only its own shard
    files, reassigned each epoch; needs world_size dividing the file count and last_batch "pad"
    or "drop"; docs/scale-out.md).
    normalize: True (ImageNet mean/std) or (mean, std): N x 3 x H x W float32 ((x/255-mean)/std),
    made on the device by packrec's kernel with device="cuda", by torch on the host otherwise.
    device: None/"cpu", or "cuda"/"cuda:N": tensors already on the GPU, uploaded asynchronously
    from pinned buffers by the C++ path (torch's current stream waits for the copy).
    rank / world_size: this process's share of each epoch, as DistributedSampler.
    last_batch: the end of an epoch that does not fill its last global batch: "short" (default;
    every record exactly once across ranks, split as evenly as it goes), "pad" (filled up with
    the epoch's first records; every batch full) or "drop" (left out; drop_last=True means this).
    plan() reports what the epoch holds (padded and dropped counts).
    on_bad_record: "raise" (the error names the record) or "skip".
    fields: names of record fields (Dataset.fields) delivered with each batch, which then is
    (images, labels, {name: values}): numbers as one array/tensor (N, count, *shape) when every
    record has the same count, else a list (None where a record lacks the field); text and JSON
    as str; bytes as bytes.
    """

    def __init__(self, source, batch_size=256, threads=0, prefetch=4, shuffle=True, seed=0,
                 rank=0, world_size=1, transform=None, size=224, resize=None, drop_last=False,
                 device=None, normalize=None, output=None, scale=(0.08, 1.0),
                 ratio=(3 / 4, 4 / 3), flip=True, shuffle_window=4096, on_bad_record="raise",
                 pin_memory=True, half=False, last_batch=None, resume_from=None, fields=(),
                 indices=None, weights=None, num_samples=None, mix=None):
        if isinstance(source, dict):  # {path: proportion}: a mix, as MosaicML's streams
            if mix is not None:
                raise errors.InvalidArgumentError("give the proportions once: a dict source or mix=")
            source, mix = list(source), list(source.values())
        self.dataset = source if isinstance(source, Dataset) else open(source)
        self.fields = (fields,) if isinstance(fields, str) else tuple(fields)
        schema = {field["name"]: field for field in self.dataset.fields}
        for name in self.fields:
            if name not in schema:
                raise errors.InvalidArgumentError(
                    f"fields: the dataset has no field {name!r} (its fields: {', '.join(schema) or 'none'})")
        self._field_specs = [schema[name] for name in self.fields]
        if last_batch is None:
            last_batch = "drop" if drop_last else "short"
        elif drop_last and last_batch != "drop":
            raise errors.InvalidArgumentError(f"drop_last=True contradicts last_batch={last_batch!r}")
        self.last_batch = _choice("last_batch", last_batch, ("short", "pad", "drop"))
        if shuffle is True:
            shuffle = "global"
        elif shuffle is False or shuffle is None:
            shuffle = "none"
        _choice("shuffle", shuffle, ("global", "windowed", "shards", "none"))
        if transform is None:  # a shuffled loader trains, an ordered one evaluates
            transform = "eval" if shuffle == "none" else "train"
        _choice("transform", transform, ("train", "eval", "none"))
        mix_ranges = _mix_ranges(self.dataset, mix)
        subset, weight_list, draws = _selection(indices, weights, num_samples, bool(mix_ranges))
        _choice("on_bad_record", on_bad_record, ("raise", "skip"))
        self.transform = transform
        self.output = _choice("output", output or ("torch" if _torch_importable() else "numpy"),
                              ("torch", "numpy"))
        self.device, cuda_device = _parse_device(device)
        if self.device is not None and self.output != "torch":
            raise errors.InvalidArgumentError("device='cuda' needs output='torch'")
        if normalize is True:
            normalize = (IMAGENET_MEAN, IMAGENET_STD)
        if normalize and transform == "none":
            raise errors.InvalidArgumentError("normalize needs decoded images (transform 'train' or 'eval')")
        self.normalize = (tuple(map(float, normalize[0])), tuple(map(float, normalize[1]))) if normalize else None
        self.half = bool(half)
        # Checked here so that the message names this call's keywords (size, resize), not the C++
        # options behind them.
        if transform != "none":
            if _count("size", size, 16384) == 0:
                raise errors.InvalidArgumentError("size must be a whole number from 1 to 16384, got 0")
            if resize is not None and _count("resize", resize) < size:
                raise errors.InvalidArgumentError(f"resize must be at least size ({size}), got {resize!r}")
        if resize is None:
            resize = max(size, size * 256 // 224)
        self._impl = _Loader(
            self.dataset, _count("batch_size", batch_size), _count("threads", threads),
            _count("prefetch", prefetch), shuffle, _count("seed", seed, 2**64 - 1),
            _count("shuffle_window", shuffle_window), last_batch, _count("rank", rank),
            _count("world_size", world_size), transform, _count("size", size), _count("resize", resize), (float(scale[0]), float(scale[1])), (float(ratio[0]), float(ratio[1])),
            bool(flip), on_bad_record, bool(pin_memory), cuda_device,
            (self.normalize[0], self.normalize[1], self.half) if (self.normalize and cuda_device is not None) else None,
            None if resume_from is None else _state_json(resume_from), list(self.fields),
            subset, weight_list, draws, mix_ranges)
        self._running = json.loads(self._impl.state())["epoch"]  # the epoch the C++ loader is in
        self._epoch = self._running  # the epoch the next iteration runs
        self._pending = True  # the C++ loader stands where the next iteration starts

    def __len__(self):
        """Batches per epoch for this rank."""
        return self._impl.batches_per_epoch

    @property
    def records_per_epoch(self):
        return self._impl.records_per_epoch

    def set_epoch(self, epoch):
        """The epoch the next iteration runs (its shuffle and crops), as DistributedSampler."""
        self._epoch = int(epoch)

    @property
    def epoch(self):
        return self._epoch

    def stats(self):
        """{images, skipped, consumer_wait_seconds, decode_seconds} so far."""
        return self._impl.stats()

    def plan(self):
        """{global_records, batches, records, padded, dropped} of the current epoch."""
        return self._impl.plan()

    def state_dict(self):
        """Where the batches taken so far end: a dict of str/int values (JSON-serialisable)."""
        state = json.loads(self._impl.state())
        if self._running != self._epoch:  # the next iteration begins another epoch
            state["epoch"], state["position"] = self._epoch, 0
        return state

    def load_state_dict(self, state):
        """Continues from state_dict(): the next iteration yields the batch after its last."""
        self._impl.resume(_state_json(state))
        self._running = self._epoch = int(state["epoch"])
        self._pending = True

    def batches(self):
        """This epoch's packrec.Batch objects (or GpuBatch with a device), without conversion."""
        self._begin()
        epoch = self._epoch
        take = self._impl.next_on_device if self.device is not None else self._impl.next
        while True:
            batch = take()
            if batch is None:
                break
            try:
                yield batch
            except GeneratorExit:
                # Left early (a break): the next iteration continues after the last batch taken,
                # which is what state_dict() says now; once every batch was taken, that is the
                # next epoch.
                if self._at_epoch_end():
                    break
                self._pending = True
                raise
        if self._epoch == epoch:  # not moved by set_epoch meanwhile
            self._epoch = epoch + 1

    def _at_epoch_end(self):
        return json.loads(self._impl.state())["position"] >= self._impl.plan()["global_records"]

    def __iter__(self):
        for batch in self.batches():
            yield self._convert(batch)

    def _begin(self):
        if not (self._pending and self._running == self._epoch):
            self._impl.start_epoch(self._epoch)
        self._running, self._pending = self._epoch, False

    def _convert(self, batch):
        converted = self._convert_images(batch)
        if not self.fields:
            return converted
        host = batch.host if self.device is not None else batch
        return (*converted, {spec["name"]: self._field_values(host, j, spec)
                             for j, spec in enumerate(self._field_specs)})

    def _field_values(self, batch, j, spec):
        """Field j of every record of the batch: numbers as one array (N, count, *shape) when
        every record has the same count, else a list of arrays (None where absent); text and
        JSON as str; bytes as bytes."""
        values, offsets, present = batch.field_data(j)
        items = [values[offsets[i]:offsets[i + 1]] if present[i] else None for i in range(len(present))]
        if spec["type"] in ("text", "json"):
            return [None if item is None else item.decode("utf-8") for item in items]
        if spec["type"] == "bytes":
            return items
        numpy = _numpy()
        dtype = numpy.dtype("<i8" if spec["type"] == "int64[]" else "<f4")
        arrays = [None if item is None else numpy.frombuffer(item, dtype).reshape(-1, *spec["shape"]).copy()
                  for item in items]
        if arrays and all(a is not None for a in arrays) and len({a.shape for a in arrays}) == 1:
            stacked = numpy.stack(arrays)
            return _torch().from_numpy(stacked) if self.output == "torch" else stacked
        if self.output == "torch":
            return [None if a is None else _torch().from_numpy(a) for a in arrays]
        return arrays

    def _convert_images(self, batch):
        if self.device is not None:
            return self._on_device(batch)
        if self.transform == "none":
            labels = batch.labels
            return batch.encoded(), (_torch().from_numpy(labels) if self.output == "torch" else labels)
        if self.output == "numpy":
            images, labels = batch.images, batch.labels
            if self.normalize:
                mean = _numpy().asarray(self.normalize[0], dtype="float32")
                std = _numpy().asarray(self.normalize[1], dtype="float32")
                images = ((images.astype("float32") / 255 - mean) / std).transpose(0, 3, 1, 2)
                images = _numpy().ascontiguousarray(images, dtype="float16" if self.half else "float32")
            return images, labels
        torch = _torch()
        images, labels = torch.from_numpy(batch.images), torch.from_numpy(batch.labels)
        if self.normalize:
            images = normalize(images, self.normalize[0], self.normalize[1],
                               torch.float16 if self.half else torch.float32)
        return images, labels

    def _on_device(self, gpu_batch):
        torch = _torch()
        gpu_batch.make_stream_wait(torch.cuda.current_stream(self.device).cuda_stream)
        interface = gpu_batch.normalized_interface if self.normalize else gpu_batch.images_interface
        images = torch.as_tensor(_CudaArray(gpu_batch, interface), device=self.device)
        labels = torch.from_numpy(gpu_batch.host.labels).to(self.device, non_blocking=False)
        return images, labels


def _mix_ranges(dataset, mix):
    """mix= (one proportion per dataset of a list source) as the C++ loader's record ranges."""
    if mix is None:
        return []
    sizes = dataset.part_sizes
    proportions = list(mix)
    if len(proportions) != len(sizes):
        raise errors.InvalidArgumentError(
            f"mix has {len(proportions)} proportions for {len(sizes)} datasets (one each, in order)")
    ranges, first = [], 0
    for size, proportion in zip(sizes, proportions):
        if isinstance(proportion, bool) or not isinstance(proportion, numbers.Real):
            raise errors.InvalidArgumentError(f"mix proportions are numbers, got {proportion!r}")
        ranges.append((first, size, float(proportion)))
        first += size
    return ranges


def _selection(indices, weights, num_samples, mixing=False):
    """Loader's indices / weights / num_samples as the C++ loader takes them (lists; 0: default)."""
    numpy = _numpy()
    subset = []
    if indices is not None:
        array = numpy.asarray(indices)
        if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
            raise errors.InvalidArgumentError(
                f"indices must be a 1-d sequence of record indices, got {type(indices).__name__} "
                f"of shape {array.shape} and dtype {array.dtype}")
        if array.size and array.min() < 0:
            raise errors.InvalidArgumentError(f"indices must be >= 0, got {int(array.min())}")
        subset = array.astype("uint64").tolist()
    weight_list = []
    if weights is not None:
        array = numpy.asarray(weights, dtype="float64")
        if array.ndim != 1:
            raise errors.InvalidArgumentError(f"weights must be 1-d, got shape {array.shape}")
        weight_list = array.tolist()
    draws = 0
    if num_samples is not None:
        if weights is None and not mixing:
            raise errors.InvalidArgumentError("num_samples counts weighted draws: it needs weights or mix")
        draws = _count("num_samples", num_samples, 2**64 - 1)
        if draws == 0:
            raise errors.InvalidArgumentError("num_samples must be at least 1")
    return subset, weight_list, draws


def _state_json(state):
    if not isinstance(state, dict):
        raise errors.InvalidArgumentError(f"a loader state is a dict from state_dict(), got {type(state).__name__}")
    return json.dumps(state)


def normalize(images, mean=IMAGENET_MEAN, std=IMAGENET_STD, dtype=None):
    """N x H x W x 3 uint8 tensor -> N x 3 x H x W float, (x / 255 - mean) / std (on its device)."""
    torch = _torch()
    dtype = dtype or torch.float32
    mean = torch.tensor(mean, dtype=dtype, device=images.device).view(1, 3, 1, 1)
    std = torch.tensor(std, dtype=dtype, device=images.device).view(1, 3, 1, 1)
    out = images.permute(0, 3, 1, 2).to(dtype).div_(255)
    return out.sub_(mean).div_(std).contiguous()


def _parse_device(device):
    """(torch device string or None, CUDA ordinal or None)."""
    if device is None:
        return None, None
    text = str(device)
    if text == "cpu":
        return None, None
    match = re.fullmatch(r"cuda(?::(\d+))?", text)
    if not match:
        raise errors.InvalidArgumentError(f"device must be None, 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    ordinal = int(match.group(1) or 0)
    available, why = gpu_available()
    if not available:
        raise errors.NotSupportedError(f"device {text!r}: {why}")
    return f"cuda:{ordinal}", ordinal


def _torch_importable():
    try:
        _torch()
        return True
    except ImportError:
        return False


def _torch():
    import torch  # noqa: PLC0415 - torch is optional and slow to import

    return torch


def _numpy():
    import numpy  # noqa: PLC0415

    return numpy
