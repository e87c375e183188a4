"""examples/scale-out/dask_convert.py on a real Dask distributed cluster (a LocalCluster of 2
worker processes with a nanny each), against one `packrec convert` byte for byte: the script
itself, then a worker process killed (SIGKILL) at a random point of a part, the scheduler
running that part again on a worker, five times."""
import importlib.util
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import CONVERT_FLAGS, PART_COUNT, assert_same_bytes, repeat_kills

distributed = pytest.importorskip("distributed", reason="apt-get install python3-distributed")

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "scale-out" / "dask_convert.py"
RESIZE_SHORT = int(CONVERT_FLAGS[CONVERT_FLAGS.index("--resize-short") + 1])


def load_example():
    spec = importlib.util.spec_from_file_location("dask_convert", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def local_cluster():
    """2 worker processes of one thread, each under a nanny."""
    return distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                    dashboard_address=None)


def test_the_script_on_a_local_cluster(tree, tmp_path, single):
    result = subprocess.run([sys.executable, EXAMPLE, tree, tmp_path / "parts", tmp_path / "train.pkr",
                             "--parts", str(PART_COUNT), "--local-workers", "2", "--resize-short",
                             str(RESIZE_SHORT)], capture_output=True, text=True, timeout=600)
    print(result.stdout, result.stderr[-2000:], sep="")
    assert result.returncode == 0
    assert f"merged {PART_COUNT} parts" in result.stdout
    assert_same_bytes(tmp_path / "train.pkr", single)
    assert not list((tmp_path / "parts").iterdir())


def executing(client):
    """{worker address: (pid, [keys it is executing now])}."""
    return client.run(lambda dask_worker: (os.getpid(), [ts.key for ts in dask_worker.state.executing]))


def test_a_killed_worker_and_the_retried_part_give_the_same_dataset(tree, tmp_path, single):
    """Each run on a fresh cluster: after a SIGKILL the nanny starts a new worker, but Dask
    2022.12 sometimes closes that one again at once (its name is still registered to the dead
    one), which would leave later runs with one worker; the retried part only needs the other."""
    example = load_example()

    def one_run(rng, run):
        with local_cluster() as cluster, distributed.Client(cluster) as client:
            return kill_a_worker_mid_part(client, example, rng, tree, run, single)

    repeat_kills(tmp_path, one_run)


def kill_a_worker_mid_part(client, example, rng, tree, run, single):
    """One conversion with a chosen part's worker SIGKILLed at a random point; True when the
    kill landed inside the part (checked: the dataset, and that another process redid it)."""
    outcome = {}

    def convert():
        try:
            outcome["stats"] = example.convert(client, tree, run / "parts", run / "train.pkr",
                                               PART_COUNT, resize_short=RESIZE_SHORT)
        except BaseException as error:  # noqa: B036 - handed to the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=convert)
    thread.start()
    target = rng.randrange(PART_COUNT)
    prefix = f"packrec-part-{target}-of-{PART_COUNT}-"
    deadline = time.monotonic() + 120
    victim = None
    while victim is None and time.monotonic() < deadline and thread.is_alive():
        for address, (pid, keys) in executing(client).items():
            victim = next(((address, pid, k) for k in keys if k.startswith(prefix)), victim)
        time.sleep(0.05)
    delay = rng.uniform(0.0, 2.5)
    part = run / "parts" / f"part-{target:05d}-of-{PART_COUNT:05d}.pkr"
    mid_part = False
    if victim is not None:
        time.sleep(delay)
        mid_part = victim[2] in executing(client).get(victim[0], (0, []))[1] and not part.exists()
        if mid_part:
            os.kill(victim[1], signal.SIGKILL)
        print(f"part {target}: worker pid {victim[1]} "
              + (f"killed {delay:.2f} s into it" if mid_part else "had finished it: not killed"))
    thread.join(timeout=600)
    assert not thread.is_alive() and "error" not in outcome, outcome.get("error")
    stats = outcome["stats"]
    assert stats["parts"] == PART_COUNT
    assert_same_bytes(run / "train.pkr", single)
    if not mid_part:
        return False  # the part ran and finished between two looks: try another point
    redone = stats["converted"][target]
    print(f"  redone by pid {redone['pid']} in {redone['seconds']:.2f} s")
    assert redone["pid"] != victim[1] and not redone["already_complete"]
    return True
