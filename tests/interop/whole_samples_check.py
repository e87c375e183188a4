#!/usr/bin/env python3
"""Whole samples through imports and exports: every member, feature and column a source holds
survives packrec, checked by writers and readers written here from the published formats (Python's
tarfile and numpy for WebDataset), not from packrec's code.

Usage: whole_samples_check.py PACKREC_CLI WORK_DIR

1. A WebDataset with jpg + txt + json + cls + npy (+ a member of a suffix no rule names) members
   -> packrec shard: `info --json` lists each field with its type and how many records had it;
   -> wds export: tarfile reads every member back equal, byte for byte (arrays: numpy equal).
2. --fields / --drop-fields choose which fields are kept; a name that no record has is refused.
3. A field first met in a later sample: the records before it have it absent (shard, lmdb, hdf5).
4. Bad input: a key repeated in one tar, an npy member of another dtype than the field's first,
   a txt member that is not UTF-8 after UTF-8 ones: named rejects under --on-error skip, and
   --on-error fail stops naming them.
"""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

import numpy

cli, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def run(*args, ok=True):
    result = subprocess.run([cli, *args], capture_output=True, text=True)
    if ok and result.returncode != 0:
        raise AssertionError(f"packrec {' '.join(args)} failed ({result.returncode}):\n"
                             f"{result.stdout}{result.stderr}")
    return result


def info(path):
    return json.loads(run("info", path, "--json").stdout)


def npy(array):
    out = io.BytesIO()
    numpy.save(out, array)
    return out.getvalue()


def write_tar(path, samples):
    """samples: [(key, {suffix: bytes})], members in the order given."""
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for key, members in samples:
            for suffix, data in members.items():
                info = tarfile.TarInfo(f"{key}.{suffix}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def read_tars(directory):
    """{key: {suffix: bytes}} of every tar in `directory`, in name order."""
    samples = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".tar"):
            continue
        with tarfile.open(os.path.join(directory, name)) as tar:
            for member in tar.getmembers():
                key, _, suffix = member.name.partition(".")
                samples.setdefault(key, {})[suffix] = tar.extractfile(member).read()
    return samples


# --- the images: real JPEGs from packrec synth ----------------------------------------------------
tree = os.path.join(work, "tree")
run("synth", tree, "--classes", "2", "--per-class", "4", "--seed", "5")
jpegs = []
for name in sorted(os.listdir(tree)):
    for file in sorted(os.listdir(os.path.join(tree, name))):
        with open(os.path.join(tree, name, file), "rb") as f:
            jpegs.append(f.read())

# --- 1. every member of an img2dataset-like WebDataset survives -----------------------------------
samples = []
for i, image in enumerate(jpegs):
    boxes = numpy.arange(4 * (i % 3 + 1), dtype=numpy.float32).reshape(-1, 4) / 7
    members = {
        "jpg": image,
        "txt": f"a photo of thing {i} \u00e9\n".encode(),
        "json": json.dumps({"url": f"http://example.com/{i}.jpg", "width": 64 + i,
                            "caption": f"thing {i}"}).encode(),
        "cls": str(i % 2).encode(),
        "npy": npy(boxes),
        "ids.npy": npy(numpy.array([i, -i, 2**40], dtype=numpy.int64)),
        "seg.bin": bytes([i]) * (i + 1),
    }
    if i % 4 == 3:
        del members["txt"]  # some samples lack a caption
    samples.append((f"sample{i:04d}", members))
wds_dir = os.path.join(work, "wds")
os.makedirs(wds_dir)
write_tar(os.path.join(wds_dir, "train-000000.tar"), samples[:5])
write_tar(os.path.join(wds_dir, "train-000001.tar"), samples[5:])

shard = os.path.join(work, "from-wds.pkr")
run("convert", os.path.join(wds_dir, "train-{000000..000001}.tar"), shard)
fields = {f["name"]: f for f in info(shard)["fields"]}
expected_types = {"txt": "text", "json": "json", "npy": "float32[]", "ids.npy": "int64[]",
                  "seg.bin": "bytes"}
assert {name: f["type"] for name, f in fields.items()} == expected_types, fields
assert fields["npy"]["shape"] == [4], fields["npy"]
assert fields["txt"]["records"] == len(samples) - len(samples) // 4, fields["txt"]
assert fields["json"]["records"] == len(samples), fields["json"]
text = run("info", shard).stdout
assert "in 6 of 8 records" in text, text

exported = os.path.join(work, "back-wds")
run("convert", shard, exported, "--format", "wds")
back = read_tars(exported)
assert len(back) == len(samples), sorted(back)
for (key, members), (out_key, out) in zip(samples, sorted(back.items())):
    for suffix, data in members.items():
        if suffix.endswith("npy"):
            original = numpy.load(io.BytesIO(data))
            again = numpy.load(io.BytesIO(out[suffix]))
            assert original.dtype == again.dtype and numpy.array_equal(original, again), \
                (key, suffix, original, again)
        else:
            assert out[suffix] == data, (key, suffix, out.get(suffix), data)
    assert set(out) == set(members), (key, sorted(out), sorted(members))

# The export reads back into the same fields (names, types) and values.
again = os.path.join(work, "again.pkr")
run("convert", exported, again)
assert [(f["name"], f["type"], f["shape"]) for f in info(again)["fields"]] == \
    [(f["name"], f["type"], f["shape"]) for f in info(shard)["fields"]]
run("verify", again)

# --- 2. choosing fields ---------------------------------------------------------------------------
only = os.path.join(work, "only.pkr")
run("convert", os.path.join(wds_dir, "*.tar"), only, "--fields", "image,label,txt")
assert [f["name"] for f in info(only)["fields"]] == ["txt"], info(only)["fields"]
dropped = os.path.join(work, "dropped.pkr")
run("convert", os.path.join(wds_dir, "*.tar"), dropped, "--drop-fields", "json,seg.bin")
assert [f["name"] for f in info(dropped)["fields"]] == ["txt", "npy", "ids.npy"]
typo = run("convert", os.path.join(wds_dir, "*.tar"), os.path.join(work, "typo.pkr"),
           "--fields", "caption", ok=False)
assert typo.returncode != 0 and "caption" in typo.stderr, typo.stderr
assert not os.path.exists(os.path.join(work, "typo.pkr"))

# --- 3. a field first met in a later sample -------------------------------------------------------
late = [(f"s{i:03d}", {"jpg": jpegs[i], "cls": b"0"}) for i in range(len(jpegs))]
late[6][1]["txt"] = b"only this one has a caption"
late_tar = os.path.join(work, "late.tar")
write_tar(late_tar, late)
for fmt, out in (("shard", "late.pkr"), ("lmdb", "late.lmdb"), ("hdf5", "late.h5")):
    path = os.path.join(work, out)
    run("convert", late_tar, path, "--format", fmt, "--shard-size", "4KiB")
    fields = info(path)["fields"]
    assert [(f["name"], f["records"]) for f in fields] == [("txt", 1)], (fmt, fields)
    run("verify", path)
    extracted = os.path.join(work, out + ".tree")
    run("extract", path, extracted)
    captions = []
    for root, _, files in os.walk(extracted):
        captions += [os.path.join(root, f) for f in files if f.endswith(".txt")]
    assert len(captions) == 1, (fmt, captions)
    with open(captions[0], "rb") as f:
        assert f.read() == b"only this one has a caption", fmt

# --- 4. bad input: named rejects, never silent ----------------------------------------------------
bad = [(f"b{i:03d}", {"jpg": jpegs[i], "cls": b"1", "npy": npy(numpy.zeros((1, 4), numpy.float32)),
                      "txt": b"fine"}) for i in range(5)]
bad[2][1]["npy"] = npy(numpy.zeros((1, 4), numpy.float64))  # another dtype than the first
bad[3][1]["txt"] = b"\xff\xfe not utf-8"
bad.append(("b001", {"jpg": jpegs[5], "cls": b"0"}))  # a key the tar had already
bad_tar = os.path.join(work, "bad.tar")
write_tar(bad_tar, bad)
failed = run("convert", bad_tar, os.path.join(work, "bad-fail.pkr"), ok=False)
assert failed.returncode != 0 and "b002" in failed.stderr and "npy" in failed.stderr, \
    failed.stderr
skipped = os.path.join(work, "bad-skip.pkr")
run("convert", bad_tar, skipped, "--on-error", "skip")
with open(os.path.join(skipped, "rejects.tsv")) as f:
    rejects = f.read()
assert "(b002)" in rejects and "npy" in rejects, rejects
assert "(b003)" in rejects and "UTF-8" in rejects, rejects
assert "key of the sample at byte" in rejects, rejects
assert info(skipped)["records"] == 3, info(skipped)
print("whole samples: every member kept, chosen, grown and checked")
