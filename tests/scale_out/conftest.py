"""Fixtures of the scale-out tests: a source tree whose parts take a few seconds each (so that a
task can be killed in the middle of one), the single conversion every distributed run must
equal byte for byte, and the comparison.

Run by ctest (tests/CMakeLists.txt) with PYTHONPATH at BUILD/python and PACKREC_CLI naming the
CLI. A suite whose every test skipped (no cluster here) exits 77, which ctest reports as
skipped, never as passed.
"""
import os
import pathlib
import random
import subprocess
import time

import pytest

import packrec

# 640 JPEGs of 1024x768, re-encoded at a short side of 700: one part of four takes about 3 s on
# one core of the 2-core VM, long enough to be killed at a random point inside it.
IMAGES_PER_CLASS = 160
CONVERT_FLAGS = ["--resize-short", "700"]
PART_COUNT = 4
# Kills that must land inside a part, per story (the acceptance: 5 random kill points).
KILL_RUNS = 5

_outcomes = {"passed": 0, "failed": 0, "skipped": 0}


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        _outcomes[report.outcome] += 1


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 0 and _outcomes["skipped"] and not _outcomes["passed"]:
        session.exitstatus = 77


@pytest.fixture(scope="session")
def packrec_cli():
    tool = os.environ.get("PACKREC_CLI")
    if not tool or not pathlib.Path(tool).exists():
        pytest.skip("PACKREC_CLI is not set (run through ctest)")
    return tool


@pytest.fixture(scope="session")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("source") / "images"
    packrec.synth(os.fspath(root), classes=4, per_class=IMAGES_PER_CLASS, seed=5, width=1024,
                  height=768)
    return root


@pytest.fixture(scope="session")
def single(tree, packrec_cli, tmp_path_factory):
    """The dataset one `packrec convert` writes, with the options every part uses."""
    out = tmp_path_factory.mktemp("single") / "train.pkr"
    subprocess.run([packrec_cli, "convert", tree, out, "--shuffle", "--seed", "1", "--on-error",
                    "skip", "-q", *CONVERT_FLAGS], check=True, timeout=600)
    return out


def files_of(path):
    """{relative name: bytes} of every file under a dataset (a shard directory or one file)."""
    path = pathlib.Path(path)
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {os.fspath(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file()}


def assert_same_bytes(merged, single):
    got, want = files_of(merged), files_of(single)
    assert sorted(got) == sorted(want), f"{merged} holds other files than {single}"
    for name in want:
        assert got[name] == want[name], f"{merged}/{name} differs from the single conversion's"


def repeat_kills(tmp_path, one_run):
    """Calls one_run(rng, run_directory) until KILL_RUNS calls say (True) that their kill
    landed inside a part; a kill that came after the part was done does not count and another
    run follows (at most 3 x KILL_RUNS). The seed is printed; PACKREC_KILL_SEED replays it."""
    seed = int(os.environ.get("PACKREC_KILL_SEED", time.time_ns() % 1000000))
    print(f"kill points from seed {seed} (PACKREC_KILL_SEED)")
    rng = random.Random(seed)
    killed = 0
    for attempt in range(3 * KILL_RUNS):
        if killed == KILL_RUNS:
            break
        run = tmp_path / f"run{attempt}"
        run.mkdir()
        killed += bool(one_run(rng, run))
    assert killed == KILL_RUNS, f"only {killed} of the kills landed inside a part"
