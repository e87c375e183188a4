"""examples/scale-out/convert-array.sbatch and merge.sbatch under a real Slurm cluster
(slurm_cluster.py: munged, slurmctld and slurmd with 2 CPUs on 127.0.0.1), against one
`packrec convert` byte for byte: a clean array with the merge waiting on it (afterok); a task
cancelled at a random point and requeued (5 times); a whole array resubmitted while parts are
done and others running; the merge refusing a missing part; a shorter array without PART_COUNT.
Every sbatch, squeue and scontrol is printed to the test log."""
import os
import pathlib
import shutil
import tempfile
import time

import pytest

from conftest import CONVERT_FLAGS, PART_COUNT, assert_same_bytes, repeat_kills
from slurm_cluster import ClusterUnavailable, SlurmCluster

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "scale-out"
CONVERT = EXAMPLES / "convert-array.sbatch"
MERGE = EXAMPLES / "merge.sbatch"
# The examples ask for 8 CPUs and 8 GB; this node has 2 CPUs. Options given to sbatch override
# the scripts' #SBATCH lines, as on a real cluster.
SMALL = ["--cpus-per-task=1", "--mem=100M"]


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """Session-scoped, and first in every test's arguments, so that a machine without a
    cluster skips before the source tree is made. The daemons' logs are kept under the test's
    base directory (slurm-logs*)."""
    # munged's socket path must fit a sockaddr_un (108 bytes): a short directory, not the
    # build tree's.
    root = tempfile.mkdtemp(prefix="packrec-slurm-")
    cluster = SlurmCluster(root)
    try:
        cluster.start()
    except ClusterUnavailable as why:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"no Slurm cluster: {why}")
    yield cluster
    cluster.stop()
    shutil.copytree(pathlib.Path(root) / "log", tmp_path_factory.mktemp("slurm-logs"),
                    dirs_exist_ok=True)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def job_env(tree, tmp_path, packrec_cli):
    """The variables the examples read, as a user exports them before sbatch."""
    return {"SRC": os.fspath(tree), "PARTS": os.fspath(tmp_path / "parts"),
            "OUT": os.fspath(tmp_path / "train.pkr"), "PACKREC": packrec_cli,
            "CONVERT_FLAGS": " ".join(CONVERT_FLAGS)}


def submit_array(slurm, tmp_path, env, array=f"0-{PART_COUNT - 1}", extra=()):
    return slurm.sbatch(f"--array={array}", *SMALL, f"--chdir={tmp_path}", *extra, CONVERT,
                        env=env)


def submit_merge(slurm, tmp_path, env, dependency):
    return slurm.sbatch(f"--dependency={dependency}", *SMALL, f"--chdir={tmp_path}", MERGE,
                        env=env)


def log_of(tmp_path, array, task):
    return (tmp_path / f"packrec-convert-{array}_{task}.log").read_text()


def part_file(env, index):
    return pathlib.Path(env["PARTS"]) / f"part-{index:05d}-of-{PART_COUNT:05d}.pkr"


def test_array_then_merge_equals_one_convert(slurm, job_env, tmp_path, single):
    array = submit_array(slurm, tmp_path, job_env)
    merge = submit_merge(slurm, tmp_path, job_env, f"afterok:{array}")
    slurm.squeue()
    # The merge waits for the array: pending on its dependency while parts run.
    assert slurm.job_states(merge)[merge] == "PENDING"
    states = slurm.wait(array)
    assert set(states.values()) == {"COMPLETED"}, states
    assert len(states) == PART_COUNT
    assert slurm.wait(merge)[merge] == "COMPLETED", (tmp_path / f"packrec-merge-{merge}.log").read_text()
    slurm.squeue()
    assert_same_bytes(tmp_path / "train.pkr", single)
    assert not list((tmp_path / "parts").iterdir())  # merge.sbatch: --remove-parts


def wait_running(slurm, task, timeout=120):
    deadline = time.monotonic() + timeout
    while slurm.job_states(task).get(task) != "RUNNING":
        assert time.monotonic() < deadline, f"{task} never ran"
        time.sleep(0.05)


def merge_log(run, merge):
    path = run / f"packrec-merge-{merge}.log"
    return path.read_text() if path.exists() else "(no log)"


def test_cancelled_task_requeued_gives_the_same_dataset(slurm, job_env, tmp_path, single):
    """scancel of one running array task at a random point of its part, then scontrol requeue;
    five times, each a mid-part kill. The merge submitted with the array is cancelled by Slurm
    (afterok can no longer be met); the merge submitted after the requeue writes the single
    conversion's bytes."""
    repeat_kills(tmp_path, lambda rng, run: cancel_and_requeue(slurm, job_env, single, rng, run))


def cancel_and_requeue(slurm, job_env, single, rng, run):
    env = {**job_env, "PARTS": os.fspath(run / "parts"), "OUT": os.fspath(run / "train.pkr")}
    array = submit_array(slurm, run, env)
    first_merge = submit_merge(slurm, run, env, f"afterok:{array}")
    index = rng.randrange(PART_COUNT)
    task = f"{array}_{index}"
    wait_running(slurm, task)
    delay = rng.uniform(0.0, 2.5)
    time.sleep(delay)
    slurm.run("scancel", task)
    state = slurm.wait(task)[task]
    print(f"task {task} (part {index}) cancelled {delay:.2f} s after it started: {state}")
    if state != "CANCELLED" or part_file(env, index).exists():
        slurm.wait(array)
        slurm.run("scancel", first_merge)
        return False  # the part was done before the kill: not a mid-part kill
    assert slurm.wait(first_merge)[first_merge] == "CANCELLED", merge_log(run, first_merge)
    # A requeued job waits about two minutes before it may start again; a user in a hurry
    # (and this test) starts it now, but in a later second than the kill: slurmd revoked the
    # killed job's credential at the kill, in whole seconds, and refuses a launch of that job
    # id with a credential of the same second ("Job N already killed, do not launch batch
    # job": the requeued task fails without running).
    time.sleep(1.05 - time.time() % 1)
    slurm.run("scontrol", "requeue", task)
    slurm.run("scontrol", "update", f"JobId={task}", "StartTime=now")
    merge = submit_merge(slurm, run, env, f"afterany:{array}")
    states = slurm.wait(array)
    assert set(states.values()) == {"COMPLETED"}, (states, slurm.jobs(task),
                                                   log_of(run, array, index), slurm.logs())
    assert slurm.jobs(task)[task]["Restarts"] == "1"
    assert slurm.wait(merge)[merge] == "COMPLETED", merge_log(run, merge)
    assert not (run / "train.pkr.partial").exists()
    assert_same_bytes(run / "train.pkr", single)
    return True


def test_whole_array_resubmitted_while_parts_run(slurm, job_env, tmp_path, single):
    """The first array runs one task at a time (%1); once part 0 is done and part 1 is being
    written, the whole array is submitted again. The second array's task 0 finds its part
    complete, its task 1 is refused while the first array's writes part 1 (exit 4, naming the
    live pid), and between them every part is written once; the merge after both arrays is the
    single conversion."""
    first = submit_array(slurm, tmp_path, job_env, array=f"0-{PART_COUNT - 1}%1")
    wait_running(slurm, f"{first}_1")
    assert part_file(job_env, 0).exists() and not part_file(job_env, 1).exists()
    second = submit_array(slurm, tmp_path, job_env)
    slurm.squeue()
    merge = submit_merge(slurm, tmp_path, job_env, f"afterany:{first}:{second}")
    states = {**slurm.wait(first), **slurm.wait(second)}
    logs = {task: log_of(tmp_path, *task.split("_")) for task in states}
    for task, log in logs.items():
        print(f"--- {task} {states[task]}\n{log}", end="")
    assert states[f"{first}_0"] == states[f"{first}_1"] == "COMPLETED"
    assert states[f"{second}_0"] == "COMPLETED"
    assert "already complete" in logs[f"{second}_0"]
    assert states[f"{second}_1"] == "FAILED"
    assert slurm.jobs(f"{second}_1")[f"{second}_1"]["ExitCode"] == "4:0"
    assert "being written by another packrec run (pid" in logs[f"{second}_1"]
    for index in range(2, PART_COUNT):
        # Whichever array reached a part first wrote it; the other found it complete or
        # being written.
        pair = (states[f"{first}_{index}"], states[f"{second}_{index}"])
        assert "COMPLETED" in pair, (index, pair)
        for task in (f"{first}_{index}", f"{second}_{index}"):
            if states[task] != "COMPLETED":
                assert "being written by another packrec run" in logs[task], logs[task]
    assert slurm.wait(merge)[merge] == "COMPLETED", merge_log(tmp_path, merge)
    assert_same_bytes(tmp_path / "train.pkr", single)


def test_merge_refuses_a_missing_part_then_the_part_is_rerun(slurm, job_env, tmp_path, single):
    """An array without task 2 (PART_COUNT=4 --array=0,1,3): the merge runs and refuses, naming
    part 2, and writes nothing. A shorter array without PART_COUNT is refused by the script.
    Task 2 run on its own with PART_COUNT completes the parts; the merge then succeeds."""
    env = {**job_env, "PART_COUNT": str(PART_COUNT)}
    array = submit_array(slurm, tmp_path, env, array="0,1,3")
    merge = submit_merge(slurm, tmp_path, env, f"afterok:{array}")
    assert set(slurm.wait(array).values()) == {"COMPLETED"}
    assert slurm.wait(merge)[merge] == "FAILED"
    log = merge_log(tmp_path, merge)
    print(log, end="")
    assert "part-00002-of-00004" in log or "part 2" in log, log
    assert not (tmp_path / "train.pkr").exists()
    assert all(part_file(env, i).exists() for i in (0, 1, 3))

    alone = submit_array(slurm, tmp_path, job_env, array="2")
    assert slurm.wait(alone)[f"{alone}_2"] == "FAILED"
    assert "set PART_COUNT=N" in log_of(tmp_path, alone, 2)
    assert not part_file(env, 2).exists()

    rerun = submit_array(slurm, tmp_path, env, array="2")
    merge = submit_merge(slurm, tmp_path, env, f"afterok:{rerun}")
    assert slurm.wait(rerun)[f"{rerun}_2"] == "COMPLETED"
    assert slurm.wait(merge)[merge] == "COMPLETED", merge_log(tmp_path, merge)
    assert_same_bytes(tmp_path / "train.pkr", single)
