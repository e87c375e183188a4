"""Partitioned conversion from Python, and the scale-out examples run with the variables their
engines set (no engine here): the Slurm array scripts under bash, the Kubernetes Indexed Job's
command with the index Kubernetes sets, and the Ray example where ray is importable. The Slurm
scripts and the Dask example also run under the real engines: tests/scale_out/."""
import os
import pathlib
import subprocess
import sys

import pytest

import packrec
from packrec import errors

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "scale-out"


def records(path):
    ds = packrec.open(path)
    info = {k: v for k, v in ds.info().items() if k != "path"}
    return [ds[i] for i in range(len(ds))], info


def cli():
    tool = os.environ.get("PACKREC_CLI")
    if not tool or not pathlib.Path(tool).exists():
        pytest.skip("PACKREC_CLI is not set (run through ctest)")
    return tool


def test_parts_from_python_merge_into_the_single_conversion(tree, tmp_path):
    single = tmp_path / "single.lmdb"
    packrec.convert(tree, single, format="lmdb", shuffle=True, seed=1)
    done = [packrec.convert(tree, tmp_path / "parts", format="lmdb", part=(i, 3), shuffle=True, seed=1)
            for i in range(3)]
    assert [d["part_path"].endswith(f"part-0000{i}-of-00003.lmdb") for i, d in enumerate(done)] == [True] * 3
    again = packrec.convert(tree, tmp_path / "parts", format="lmdb", part=(1, 3), shuffle=True, seed=1)
    assert again["already_complete"]
    stats = packrec.merge(tmp_path / "merged.lmdb", tmp_path / "parts", remove_parts=True)
    assert stats["parts"] == 3 and stats["records"] == 120
    assert records(single)[0] == records(tmp_path / "merged.lmdb")[0]
    assert not list((tmp_path / "parts").iterdir())
    with pytest.raises(errors.InvalidInputError, match="not a part"):
        packrec.merge(tmp_path / "again.lmdb", [single])
    # Python and the CLI record the same options: their conversions (and parts) agree.
    subprocess.run([cli(), "convert", tree, tmp_path / "cli.lmdb", "--format", "lmdb", "--shuffle",
                    "--seed", "1", "-q"], check=True, timeout=300)
    assert records(tmp_path / "cli.lmdb") == records(single)


def test_the_slurm_array_scripts(tree, tmp_path):
    env = {**os.environ, "SRC": os.fspath(tree), "PARTS": os.fspath(tmp_path / "parts"),
           "OUT": os.fspath(tmp_path / "train.pkr"), "PACKREC": cli(), "SLURM_CPUS_PER_TASK": "1"}
    tasks = [subprocess.Popen(["bash", EXAMPLES / "convert-array.sbatch"],
                              env={**env, "SLURM_ARRAY_TASK_ID": str(i), "SLURM_ARRAY_TASK_COUNT": "4",
                                   "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "3"})
             for i in range(4)]
    assert [task.wait(timeout=300) for task in tasks] == [0] * 4
    subprocess.run(["bash", EXAMPLES / "merge.sbatch"], env=env, check=True, timeout=300,
                   capture_output=True)
    single = tmp_path / "single.pkr"
    subprocess.run([cli(), "convert", tree, single, "--shuffle", "--seed", "1", "--on-error", "skip",
                    "-q"], check=True, timeout=300)
    assert records(single) == records(tmp_path / "train.pkr")


def test_the_kubernetes_indexed_job(tree, tmp_path):
    yaml = pytest.importorskip("yaml")
    job = yaml.safe_load((EXAMPLES / "convert-indexed-job.yaml").read_text())
    spec = job["spec"]
    assert job["kind"] == "Job" and spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == 16
    container = spec["template"]["spec"]["containers"][0]
    command = container["args"][0]
    assert '--part "${JOB_COMPLETION_INDEX}/16"' in command
    # The pod's command, run as each of 16 pods would (paths mapped to this test's).
    command = command.replace("packrec ", f"{cli()} ", 1).replace("/source/train", os.fspath(tree))
    command = command.replace("/data/train-parts", os.fspath(tmp_path / "parts"))
    for index in range(16):
        subprocess.run(["/bin/sh", "-c", command], env={**os.environ, "JOB_COMPLETION_INDEX": str(index)},
                       check=True, timeout=300)
    packrec.merge(tmp_path / "train.pkr", tmp_path / "parts")
    single = tmp_path / "single.pkr"
    subprocess.run([cli(), "convert", tree, single, "--shuffle", "--seed", "1", "--threads", "8",
                    "--on-error", "skip", "-q"], check=True, timeout=300)
    assert records(single) == records(tmp_path / "train.pkr")


def test_the_ray_example(tree, tmp_path):
    pytest.importorskip("ray")
    subprocess.run([sys.executable, EXAMPLES / "ray_convert.py", tree, tmp_path / "parts",
                    tmp_path / "train.pkr", "--parts", "4", "--threads", "1"], check=True, timeout=600)
    single = tmp_path / "single.pkr"
    packrec.convert(tree, single, shuffle=True, seed=1, on_error="skip")
    assert records(single) == records(tmp_path / "train.pkr")


def test_shuffle_shards_gives_each_rank_its_own_files(tree, tmp_path):
    for kib in range(64, 16, -4):  # a shard size that gives an even number of files
        path = tmp_path / f"many-{kib}.pkr"
        packrec.convert(tree, path, shard_size=kib << 10)
        files = packrec.open(path).info()["files"]
        if len(files) % 2 == 0:
            break
    assert len(files) % 2 == 0, len(files)
    file_of = {}
    for n, f in enumerate(files):
        file_of.update({i: n for i in range(f["first_record"], f["first_record"] + f["record_count"])})
    for epoch in range(2):
        mine = []
        for rank in range(2):
            loader = packrec.Loader(path, batch_size=4, rank=rank, world_size=2, shuffle="shards",
                                    last_batch="pad", transform="none", output="numpy")
            loader.set_epoch(epoch)
            mine.append({file_of[int(i)] for b in loader.batches() for i in b.indices})
        assert not mine[0] & mine[1] and len(mine[0]) == len(mine[1]) == len(files) // 2
    with pytest.raises(errors.InvalidArgumentError, match="pad or drop"):
        packrec.Loader(path, rank=0, world_size=2, shuffle="shards")


def test_convert_imports_and_exports_other_formats(tmp_path):
    """packrec.convert exports to wds/tfrecord/recordio and imports them back (from_ detected or
    given), keys, labels and bytes intact; bad names are refused before anything is written."""
    tree = tmp_path / "tree"
    subprocess.run([os.environ["PACKREC_CLI"], "synth", str(tree), "--classes", "2",
                    "--per-class", "4"], check=True, stdout=subprocess.DEVNULL)
    packrec.convert(tree, tmp_path / "direct")
    direct = packrec.open(tmp_path / "direct")
    expected = [tuple(direct[i]) for i in range(len(direct))]
    for fmt in ("wds", "tfrecord", "recordio"):
        packrec.convert(tree, tmp_path / fmt, format=fmt)
        packrec.convert(tmp_path / fmt, tmp_path / (fmt + ".pkr"), from_=fmt)
        back = packrec.open(tmp_path / (fmt + ".pkr"))
        assert [tuple(back[i]) for i in range(len(back))] == expected, fmt
    with pytest.raises(errors.InvalidArgumentError, match="from_"):
        packrec.convert(tree, tmp_path / "x", from_="zip")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("fmt", ["shard", "lmdb"])
def test_a_killed_conversion_resumes_from_python(tree, tmp_path, fmt):
    """convert(..., resume=True) after the CLI was killed with SIGKILL mid-conversion: the records
    it kept are not redone, and the result is the uninterrupted conversion's."""
    import json
    import signal
    import time
    reference = tmp_path / "reference"
    packrec.convert(tree, reference, format=fmt, shard_size="16KiB")
    out = tmp_path / "out"
    args = [cli(), "convert", "-q", tree, out, "--format", fmt, "--shard-size", "16KiB",
            "--checkpoint-every", "16KiB", "--threads", "1"]
    for attempt in range(20):
        subprocess.run(["rm", "-rf", out], check=True)
        process = subprocess.Popen(args)
        journal = out / "resume.json"
        deadline = time.monotonic() + 10
        # Kill it as soon as its journal holds records (a resume point past the start).
        while process.poll() is None and time.monotonic() < deadline:
            try:
                if json.loads(journal.read_text())["records"] > 0:
                    break
            except (OSError, ValueError, KeyError):
                pass
        process.send_signal(signal.SIGKILL)
        if process.wait() == -signal.SIGKILL and journal.exists():
            break
    else:
        pytest.skip("every run finished before it could be killed")
    kept = json.loads(journal.read_text())["records"]
    with pytest.raises(errors.AlreadyExistsError, match="resume=True") as refused:
        packrec.convert(tree, out, format=fmt, shard_size="16KiB")
    assert refused.value.remedy == "resume_or_overwrite" and "--resume" not in str(refused.value)
    done = packrec.convert(tree, out, format=fmt, shard_size="16KiB", resume=True)
    assert done["resumed_records"] == kept
    (got, got_info), (want, want_info) = records(out), records(reference)
    assert got == want
    # data.mdb may be larger than an uninterrupted one's: the records deleted on resume leave
    # free pages. Everything else the dataset says is the same.
    assert {k: v for k, v in got_info.items() if k != "files"} == \
        {k: v for k, v in want_info.items() if k != "files"}
    assert not journal.exists()
    again = packrec.convert(tree, out, format=fmt, shard_size="16KiB", resume=True)
    assert again["already_complete"] and again["records_written"] == len(packrec.open(out))
