"""Shared fixtures: a real synthetic JPEG tree and the same tree converted to every format.

Run by ctest (tests/CMakeLists.txt) with PYTHONPATH at BUILD/python and PACKREC_DUMP_BATCHES
naming the C++ tool that writes the loader's batches to a file.
"""
import os
import pathlib

import pytest

import packrec

FORMATS = ("shard", "lmdb", "hdf5")


@pytest.fixture(scope="session")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree") / "images"
    packrec.synth(os.fspath(root), classes=4, per_class=30, seed=11, width=160, height=140)
    return root


@pytest.fixture(scope="session")
def tree_files(tree):
    """{key: (bytes, label)} from the files themselves, labels as ImageFolder gives them."""
    classes = sorted(p.name for p in tree.iterdir() if p.is_dir())
    files = {}
    for label, name in enumerate(classes):
        for path in sorted((tree / name).iterdir()):
            files[f"{name}/{path.name}"] = (path.read_bytes(), label)
    return files


@pytest.fixture(scope="session")
def datasets(tree, tmp_path_factory):
    out = tmp_path_factory.mktemp("datasets")
    paths = {}
    for fmt in FORMATS:
        path = out / {"shard": "ds.pkr", "lmdb": "ds.lmdb", "hdf5": "ds.h5"}[fmt]
        # Small shards, so that the shard dataset has several files.
        packrec.convert(tree, path, format=fmt, shard_size=1 << 20, threads=2)
        paths[fmt] = path
    return paths


@pytest.fixture(params=FORMATS)
def dataset_path(request, datasets):
    return datasets[request.param]


@pytest.fixture(scope="session")
def dump_tool():
    tool = os.environ.get("PACKREC_DUMP_BATCHES")
    if not tool or not pathlib.Path(tool).exists():
        pytest.skip("PACKREC_DUMP_BATCHES is not set (run through ctest)")
    return tool


def flip_payload_byte(root, index):
    """Flips one bit in the middle of record `index`'s payload in shard dataset `root`."""
    data = packrec.open(root, verify_checksums=False)[index][0]
    for path in sorted(pathlib.Path(root).glob("shard-*")):
        content = path.read_bytes()
        at = content.find(data)
        if at >= 0:
            with open(path, "r+b") as shard:
                shard.seek(at + len(data) // 2)
                shard.write(bytes([content[at + len(data) // 2] ^ 0x40]))
            return
    raise AssertionError(f"record {index}'s bytes are in no shard of {root}")
