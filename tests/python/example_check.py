#!/usr/bin/env python3
"""examples/train_resnet.py runs with either loader and reports images/s for both.

Usage: example_check.py EXAMPLE WORK_DIR
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import packrec

example, work = sys.argv[1], pathlib.Path(sys.argv[2])
shutil.rmtree(work, ignore_errors=True)
work.mkdir(parents=True)
packrec.synth(os.fspath(work / "tree"), classes=3, per_class=12, seed=2, width=120, height=100)
for loader in ("torchvision", "packrec"):
    out = subprocess.run([sys.executable, example, "--loader", loader, "--data", "tree",
                          "--steps", "2", "--batch-size", "8", "--size", "64", "--device", "cpu"],
                         cwd=work, check=True, capture_output=True, text=True).stdout
    print(out.strip().splitlines()[-1])
    assert re.search(rf"loader={loader} .*training_images_per_s=[0-9.]+", out), out
    assert out.count("loss") == 2, out
