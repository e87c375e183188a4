"""Why a training loop waits: `packrec.diagnose(dataloader, steps=N, step=...)`.

Times, batch by batch, what a training loop spends (the wait inside `next()`, the host-to-device
copy, the step) while sampling the machine from /proc (CPU busy, iowait, steal, context switches),
then says which of storage, decode and augment, worker IPC or the upload bounds it, and the knob
to turn (`num_workers`, `pin_memory`, `prefetch_factor`, packrec's `threads`...). Works on any
iterable of batches: a torch DataLoader, a packrec.Loader, a generator.

As a script wrapper, `python -m packrec.diagnose train.py ARGS...` runs train.py unchanged with
every torch DataLoader iterator timed (the wait in `__next__`, and the time between two calls as
the step) and prints the diagnosis of each loader when the script ends.
"""
import os
import sys
import time
import types

# Shares of the loop's time above which a part is said to bound it.
_DATA_BOUND = 0.2     # waiting for the next batch
_UPLOAD_BOUND = 0.2   # copying to the device
_CPU_SATURATED = 0.85  # all cores busy (user + system + nice + irq)
_IOWAIT_HIGH = 0.15   # of all CPU time, idle with I/O outstanding


def _cpu_times():
    """System-wide jiffies from /proc/stat's first line, and the context switches so far."""
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    fields = [int(v) for v in lines[0].split()[1:]]
    names = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
    times = dict(zip(names, fields + [0] * (len(names) - len(fields))))
    times["ctxt"] = next((int(l.split()[1]) for l in lines if l.startswith("ctxt ")), 0)
    return times


def _machine_shares(before, after, seconds):
    if before is None or after is None:
        return {}
    delta = {k: after[k] - before[k] for k in before}
    total = sum(delta[k] for k in ("user", "nice", "system", "idle", "iowait", "irq", "softirq",
                                   "steal")) or 1
    return {
        "cpu_busy_share": (delta["user"] + delta["nice"] + delta["system"] + delta["irq"] +
                           delta["softirq"]) / total,
        "iowait_share": delta["iowait"] / total,
        "steal_share": delta["steal"] / total,
        "context_switches_per_s": delta["ctxt"] / seconds if seconds > 0 else 0.0,
    }


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def _to_device(batch, device, torch):
    """Copies every tensor in `batch` (nested tuples, lists, dicts) with non_blocking=True."""
    if torch is not None and isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(b, device, torch) for b in batch)
    if isinstance(batch, dict):
        return {k: _to_device(v, device, torch) for k, v in batch.items()}
    return batch


def _is_pinned(batch, torch):
    if torch is not None and isinstance(batch, torch.Tensor):
        return batch.is_pinned()
    if isinstance(batch, (list, tuple)):
        return any(_is_pinned(b, torch) for b in batch)
    if isinstance(batch, dict):
        return any(_is_pinned(v, torch) for v in batch.values())
    return False


def _batch_size(batch, torch):
    if torch is not None and isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() > 0 else 1
    if hasattr(batch, "shape") and len(getattr(batch, "shape")) > 0:
        return int(batch.shape[0])
    if isinstance(batch, (list, tuple)) and batch:
        return _batch_size(batch[0], torch)
    if isinstance(batch, dict) and batch:
        return _batch_size(next(iter(batch.values())), torch)
    return 0


def _diagnosis(loader, started, cpu_before, steps, images, wait, upload, step, pinned, batches):
    """The figures of a loop timed since `started`, the machine's shares and the verdict."""
    elapsed = time.perf_counter() - started
    per_second = (lambda amount: amount / elapsed) if elapsed > 0 else (lambda amount: 0.0)
    report = Diagnosis(steps=steps, seconds=elapsed, images=images,
                       images_per_s=per_second(images), wait_s=wait, upload_s=upload, step_s=step,
                       wait_share=per_second(wait), upload_share=per_second(upload),
                       step_share=per_second(step),
                       pinned=pinned, loader=_loader_settings(loader), batches=batches)
    report.update(_machine_shares(cpu_before, _cpu_times(), elapsed))
    _classify(report, report["loader"], os.cpu_count() or 1)
    return report


class Diagnosis(dict):
    """The figures (as a dict, JSON-ready) and, through str(), the verdict in words."""

    def __str__(self):
        lines = [f"packrec.diagnose: {self['steps']} steps, {self['seconds']:.2f} s, "
                 f"{self['images_per_s']:,.0f} images/s"]
        lines.append(f"  waiting for data {self['wait_share']:.0%}, upload "
                     f"{self['upload_share']:.0%}, step {self['step_share']:.0%} of the loop")
        if "cpu_busy_share" in self:
            lines.append(f"  machine: CPU busy {self['cpu_busy_share']:.0%}, iowait "
                         f"{self['iowait_share']:.0%}, steal {self['steal_share']:.0%}, "
                         f"{self['context_switches_per_s']:,.0f} context switches/s")
        lines.append(f"  verdict: {self['verdict']}" +
                     (f" ({self['cause']})" if self.get("cause") else ""))
        for knob in self["knobs"]:
            lines.append(f"  - {knob['knob']} = {knob['value']}: {knob['why']}")
        if self.get("packrec"):
            p = self["packrec"]
            lines.append(f"  packrec.Loader on {p['dataset']}: {p['images_per_s']:,.0f} images/s "
                         f"({p['ratio']:.1f}x this loop's data rate)")
        return "\n".join(lines)


def _loader_settings(loader):
    settings = {}
    for name in ("num_workers", "pin_memory", "prefetch_factor", "batch_size", "persistent_workers"):
        if hasattr(loader, name):
            settings[name] = getattr(loader, name)
    return settings


def _classify(report, settings, cores):
    """The verdict, its cause, and the knobs to turn, from the measured shares."""
    knobs = []
    wait, upload = report["wait_share"], report["upload_share"]
    busy = report.get("cpu_busy_share")
    iowait = report.get("iowait_share", 0.0)
    workers = settings.get("num_workers")
    if upload >= _UPLOAD_BOUND and upload >= wait:
        report["verdict"] = "upload-bound"
        report["cause"] = "host-to-device copies"
        if not report["pinned"]:
            knobs.append({"knob": "pin_memory", "value": True,
                          "why": "pageable batches are copied synchronously through a staging "
                                 "buffer; pinned ones copy asynchronously with non_blocking=True"})
        knobs.append({"knob": "dtype", "value": "uint8",
                      "why": "ship uint8 batches and normalise on the device: 4x fewer bytes than "
                             "float32 (packrec.Loader(normalize=True, device=...) does this)"})
    elif wait >= _DATA_BOUND:
        report["verdict"] = "data-bound"
        if iowait >= _IOWAIT_HIGH:
            report["cause"] = "storage"
            knobs.append({"knob": "format", "value": "packed",
                          "why": f"the CPUs sat in iowait {iowait:.0%} of the time: pack the "
                                 "files (packrec convert SRC OUT.pkr) so reads are large and "
                                 "sequential, or copy the data to local disk or tmpfs when it fits "
                                 "in memory"})
        elif busy is not None and busy >= _CPU_SATURATED:
            report["cause"] = "decode and augment"
            knobs.append({"knob": "resize_short", "value": 256,
                          "why": f"every core is busy ({busy:.0%}): store smaller images "
                                 "(packrec convert --resize-short 256), decode on the GPU, or use "
                                 "a loader with less Python per image (packrec.Loader)"})
        else:
            report["cause"] = "too few workers, or worker IPC" if workers else \
                "the data loading runs in the training process (num_workers=0)"
            suggested = max(1, min(cores, (workers or 0) * 2 or cores))
            knobs.append({"knob": "num_workers", "value": suggested,
                          "why": f"the CPUs were {busy:.0%} busy and iowait low: more workers "
                                 "would load batches in parallel" if busy is not None else
                                 "more workers would load batches in parallel"})
            if workers:
                knobs.append({"knob": "prefetch_factor",
                              "value": max(2, 2 * (settings.get("prefetch_factor") or 2)),
                              "why": "more batches in flight per worker hide uneven batch times"})
                knobs.append({"knob": "persistent_workers", "value": True,
                              "why": "workers kept across epochs do not pay their start again"})
    else:
        report["verdict"] = "compute-bound"
        report["cause"] = "the step"
        knobs.append({"knob": "none", "value": "-",
                      "why": f"the loop waits for data {wait:.0%} of the time: the data keeps up, "
                             "a faster loader would not speed training up"})
    report["knobs"] = knobs


def diagnose(loader, steps=50, step=None, device=None, warmup=2, packrec_dataset=None,
             file=sys.stdout):
    """Runs `steps` batches of `loader` as a training loop would and says what bounds it.

    loader: any iterable of batches (torch DataLoader, packrec.Loader, a generator).
    step: a callable taking the batch on the device (your training step; synchronise inside it
        for GPU work), or a number of seconds to sleep (a stand-in step), or None (no step).
    device: where batches go ("cuda", a torch.device); None: no upload is timed.
    warmup: batches run first and not counted (worker start-up, first-batch costs).
    packrec_dataset: a packrec dataset of the same data; its packrec.Loader then runs for the
        same number of images and the report says how fast it delivers them.
    file: where the verdict is printed (None: nowhere). Returns the Diagnosis (a dict).
    """
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    if step is not None and not callable(step):
        seconds = float(step)
        if seconds < 0:
            raise ValueError(f"step seconds must be at least 0, got {step}")
        step = lambda batch: time.sleep(seconds)  # noqa: E731 - a stand-in step
    torch = _torch()
    synchronize = None
    if device is not None:
        if torch is None:
            raise ValueError("device= needs torch")
        device = torch.device(device)
        if device.type == "cuda":
            synchronize = lambda: torch.cuda.synchronize(device)  # noqa: E731
    iterator = iter(loader)
    wait = upload = step_time = 0.0
    images = 0
    pinned = False
    per_batch = []
    counted = 0
    before = started = None
    for index in range(warmup + steps):
        t0 = time.perf_counter()
        try:
            batch = next(iterator)
        except StopIteration:
            break
        t1 = time.perf_counter()
        if device is not None:
            batch = _to_device(batch, device, torch)
            if synchronize is not None:
                synchronize()
        t2 = time.perf_counter()
        if step is not None:
            step(batch)
        t3 = time.perf_counter()
        if index < warmup:
            continue
        if started is None:
            started, before = t0, _cpu_times()
        counted += 1
        wait += t1 - t0
        upload += t2 - t1
        step_time += t3 - t2
        images += _batch_size(batch, torch)
        pinned = pinned or _is_pinned(batch, torch)
        per_batch.append({"wait_s": t1 - t0, "upload_s": t2 - t1, "step_s": t3 - t2})
    if counted == 0:
        raise ValueError(f"the loader gave no batch after {warmup} warm-up batches")
    report = _diagnosis(loader, started, before, counted, images, wait, upload, step_time, pinned,
                        per_batch)
    if packrec_dataset is not None:
        report["packrec"] = _packrec_rate(packrec_dataset, report, images, counted)
    if file is not None:
        print(report, file=file)
    return report


def _packrec_rate(dataset, report, images, batches):
    """packrec.Loader over the same data, for as many images, with the train transform."""
    import packrec
    batch_size = max(1, images // max(batches, 1))
    loader = packrec.Loader(dataset, batch_size=batch_size, shuffle=True, transform="train",
                            output="numpy")
    iterator = iter(loader)
    next(iterator)  # first batch: threads starting, files opening
    start = time.perf_counter()
    delivered = 0
    for _ in range(batches):
        try:
            delivered += len(next(iterator)[0])
        except StopIteration:
            break
    seconds = time.perf_counter() - start
    rate = delivered / seconds if seconds > 0 else 0.0
    data_rate = images / report["wait_s"] if report["wait_s"] > 0 else float("inf")
    return {"dataset": os.fspath(dataset), "images_per_s": rate,
            "ratio": rate / data_rate if data_rate not in (0, float("inf")) else float("inf")}


class _Timer:
    """Per DataLoader iterator: time inside __next__ (the wait) and between calls (the step)."""

    def __init__(self, loader):
        self.loader = loader
        self.wait = self.step = 0.0
        self.batches = self.images = 0
        self.last_return = None
        self.started = time.perf_counter()
        self.before = _cpu_times()

    def report(self):
        return _diagnosis(self.loader, self.started, self.before, self.batches, self.images,
                          self.wait, 0.0, self.step,
                          bool(getattr(self.loader, "pin_memory", False)), [])


def _run_script(argv):
    """python -m packrec.diagnose SCRIPT ARGS...: SCRIPT runs as __main__, its loaders timed."""
    import runpy
    torch = _torch()
    if torch is None:
        print("packrec.diagnose: torch is not installed; nothing to time", file=sys.stderr)
        return 2
    from torch.utils.data import dataloader
    timers = []
    original = dataloader._BaseDataLoaderIter.__next__

    def timed_next(self):
        timer = getattr(self, "_packrec_timer", None)
        if timer is None:
            timer = self._packrec_timer = _Timer(getattr(self, "_packrec_loader", None))
            timers.append(timer)
        now = time.perf_counter()
        if timer.last_return is not None:
            timer.step += now - timer.last_return
        batch = original(self)
        timer.last_return = time.perf_counter()
        timer.wait += timer.last_return - now
        timer.batches += 1
        timer.images += _batch_size(batch, torch)
        return batch

    original_iter = dataloader.DataLoader.__iter__

    def tagged_iter(self):
        iterator = original_iter(self)
        iterator._packrec_loader = self
        return iterator

    dataloader._BaseDataLoaderIter.__next__ = timed_next
    dataloader.DataLoader.__iter__ = tagged_iter
    sys.argv = list(argv)
    try:
        runpy.run_path(argv[0], run_name="__main__")
    finally:
        dataloader._BaseDataLoaderIter.__next__ = original
        dataloader.DataLoader.__iter__ = original_iter
        for number, timer in enumerate(timers, 1):
            if timer.batches > 1:
                print(f"\nDataLoader iterator {number}:\n{timer.report()}", file=sys.stderr)
    return 0


class _CallableModule(types.ModuleType):
    """packrec.diagnose(loader, ...) calls diagnose(); the module stays importable as itself."""

    def __call__(self, *args, **kwargs):
        return diagnose(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip() + "\n\nUsage: python -m packrec.diagnose SCRIPT [ARGS...]")
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    sys.exit(_run_script(sys.argv[1:]))
