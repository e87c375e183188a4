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
import struct
import sys
import tarfile

import numpy

import cli_runner
from published_formats import (MAGIC, caffe_datum, field, fields_of, mds_shard, read_varint,
                               recordio_record, tfrecord_frames, varint)

cli, work = sys.argv[1], sys.argv[2]
run = cli_runner.start(cli, work)


def fail_then_skip(source, name, *named, extra=()):
    """`convert` of a source with bad records: under --on-error fail it stops naming each of
    `named`; under skip it converts the rest. Returns (the skip output, its rejects.tsv)."""
    failed = run("convert", source, os.path.join(work, name + "-fail.pkr"), *extra, ok=False)
    assert failed.returncode != 0, failed.stdout
    for text in named:
        assert text in failed.stderr, (text, failed.stderr)
    skipped = os.path.join(work, name + "-skip.pkr")
    run("convert", source, skipped, *extra, "--on-error", "skip")
    with open(os.path.join(skipped, "rejects.tsv")) as f:
        return skipped, f.read()


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
skipped, rejects = fail_then_skip(bad_tar, "bad", "b002", "npy")
assert "(b002)" in rejects and "npy" in rejects, rejects
assert "(b003)" in rejects and "UTF-8" in rejects, rejects
assert "key of the sample at byte" in rejects, rejects
assert info(skipped)["records"] == 3, info(skipped)

# --- 5. a TFRecord with features of the three kinds survives -------------------------------------
def length_delimited(number, payload):
    return field(number, 2, payload)


def feature(value):
    """tf.train.Feature: bytes_list (1), float_list (2, packed floats), int64_list (3, packed
    varints, two's complement in 64 bits)."""
    kind, values = value
    if kind == "bytes":
        inner = b"".join(length_delimited(1, v) for v in values)
        return length_delimited(1, inner)
    if kind == "float":
        return length_delimited(2, length_delimited(1, struct.pack(f"<{len(values)}f", *values)))
    packed = b"".join(varint(v & 0xFFFFFFFFFFFFFFFF) for v in values)
    return length_delimited(3, length_delimited(1, packed))


def tf_example(features):
    entries = b"".join(length_delimited(1, length_delimited(1, name.encode()) +
                                        length_delimited(2, feature(value)))
                       for name, value in features.items())
    return length_delimited(1, entries)


def parse_feature(data):
    """(kind, values) of a serialized Feature."""
    (kind, _, inner), = fields_of(data)
    if kind == 1:
        return "bytes", [v for _, _, v in fields_of(inner)]
    packed = b"".join(v for _, _, v in fields_of(inner))
    if kind == 2:
        return "float", list(struct.unpack(f"<{len(packed) // 4}f", packed))
    values, pos = [], 0
    while pos < len(packed):
        v, pos = read_varint(packed, pos)
        values.append(v - (1 << 64) if v >= 1 << 63 else v)
    return "int64", values


def parse_tf_example(data):
    out = {}
    (_, _, features), = fields_of(data)
    for _, _, entry in fields_of(features):
        parts = {number: value for number, _, value in fields_of(entry)}
        out[parts[1].decode()] = parse_feature(parts[2])
    return out


def read_tfrecords(directory):
    records = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".tfrecord"):
            continue
        with open(os.path.join(directory, name), "rb") as f:
            blob = f.read()
        pos = 0
        while pos < len(blob):
            (length,) = struct.unpack_from("<Q", blob, pos)
            records.append(parse_tf_example(blob[pos + 12:pos + 12 + length]))
            pos += 16 + length
    return records


tf_records = []
for i, image in enumerate(jpegs):
    objects = i % 3 + 1
    tf_records.append({
        "image/encoded": ("bytes", [image]),
        "image/class/label": ("int64", [i % 2]),
        "image/filename": ("bytes", [f"img{i:03d}.jpg".encode()]),
        "image/source_id": ("bytes", [f"{1000 + i}".encode()]),
        "image/key/sha256": ("bytes", [bytes([i, 0xFF, 0x00, 0x80])]),  # bytes, not text
        "image/object/bbox/xmin": ("float", [0.125 * k for k in range(objects)]),
        "image/object/bbox/ymax": ("float", [0.5 + 0.0625 * k for k in range(objects)]),
        "image/object/class/label": ("int64", list(range(objects))),
        "image/object/class/text": ("bytes", [f"thing{k}".encode() for k in range(objects)]),
        "image/object/area": ("int64", [-5, 2**40][:objects % 2 + 1]),
        "caption": ("bytes", [f"caption {i}".encode()]),
    })
tf_path = os.path.join(work, "train.tfrecord")
with open(tf_path, "wb") as f:
    f.write(tfrecord_frames([tf_example(r) for r in tf_records]))
tf_shard = os.path.join(work, "from-tf.pkr")
run("convert", tf_path, tf_shard)
tf_fields = {f["name"]: f for f in info(tf_shard)["fields"]}
assert tf_fields["image.object.bbox.xmin"]["type"] == "float32[]", tf_fields
assert tf_fields["image.object.class.label"]["type"] == "int64[]", tf_fields
assert tf_fields["image.object.class.text"]["type"] == "json", tf_fields
assert tf_fields["image.source_id"]["type"] == "text", tf_fields
assert tf_fields["image.key.sha256"]["type"] == "bytes", tf_fields
assert tf_fields["caption"]["type"] == "text", tf_fields
assert "image.encoded" not in tf_fields and "image.filename" not in tf_fields, tf_fields
tf_out = os.path.join(work, "back-tf")
run("convert", tf_shard, tf_out, "--format", "tfrecord")
back_tf = read_tfrecords(tf_out)
assert len(back_tf) == len(tf_records)
for original, again in zip(tf_records, back_tf):
    for name, (kind, values) in original.items():
        assert name in again, (name, sorted(again))
        got_kind, got = again[name]
        assert got_kind == kind, (name, kind, got_kind)
        if kind == "float":
            assert numpy.array_equal(numpy.float32(values), numpy.float32(got)), (name, values, got)
        else:
            assert got == values, (name, values, got)

# A feature of another type than its first record's is a named reject, never a silent change.
odd = dict(tf_records[1], caption=("int64", [7]))
bad_tf = os.path.join(work, "bad.tfrecord")
with open(bad_tf, "wb") as f:
    f.write(tfrecord_frames([tf_example(tf_records[0]), tf_example(odd),
                             tf_example(tf_records[2])]))
skipped_tf, rejects = fail_then_skip(bad_tf, "bad-tf", "caption", "record 1")
assert "record 1 at byte" in rejects and "caption is int64[]" in rejects, rejects
assert info(skipped_tf)["records"] == 2

# --- 6. wds -> tfrecord -> packrec -> wds keeps every field ---------------------------------------
chain_tf = os.path.join(work, "chain-tf")
run("convert", os.path.join(wds_dir, "*.tar"), chain_tf, "--format", "tfrecord")
chain_shard = os.path.join(work, "chain.pkr")
run("convert", chain_tf, chain_shard)
chain_wds = os.path.join(work, "chain-wds")
run("convert", chain_shard, chain_wds, "--format", "wds")
chained = read_tars(chain_wds)
for (key, members), (_, out) in zip(samples, sorted(chained.items())):
    for suffix, data in members.items():
        if suffix.endswith("npy"):
            assert numpy.array_equal(numpy.load(io.BytesIO(data)),
                                     numpy.load(io.BytesIO(out[suffix]))), (key, suffix)
        else:
            assert out[suffix] == data, (key, suffix, out.get(suffix), data)


# --- 7. an MDS dataset with str, int, float, json, ndarray and jpeg columns survives -------------
def mds_ndarray(array):
    """Streaming's NDArray encoding without a fixed dtype or shape: dtype code, ndim << 2 |
    shape width code (uint8 here), the shape, the values."""
    codes = {"uint8": 8, "int16": 17, "float32": 34, "int64": 65, "float64": 66}
    return (bytes([codes[array.dtype.name], (array.ndim << 2) | 0]) +
            bytes(array.shape) + array.tobytes())


# index.json lists columns sorted by name, as MDSWriter does.
mds_columns = [("caption", "str", None), ("count", "int", 8), ("emb", "ndarray", None),
               ("grid", "ndarray:float32:2,3", 24), ("image", "jpeg", None),
               ("label", "int", 8), ("meta", "json", None), ("precise", "float64", 8),
               ("score", "float32", 4), ("small", "int16", 2)]
mds_rows = []
for i, image in enumerate(jpegs):
    mds_rows.append({
        "caption": f"mds caption {i} ü".encode(),
        "count": struct.pack("<q", -3 * i),
        "emb": mds_ndarray(numpy.arange(i + 2, dtype=[numpy.uint8, numpy.float64][i % 2])),
        "grid": (numpy.arange(6, dtype=numpy.float32) * i).tobytes(),
        "image": image,
        "label": struct.pack("<q", i % 2),
        "meta": json.dumps({"i": i, "tags": ["a", "b"][:i % 3]}).encode(),
        "precise": struct.pack("<d", 0.1 * i + 1e-12),
        "score": struct.pack("<f", i / 3),
        "small": struct.pack("<h", -i),
    })


def mds_sample_bytes(row):
    sizes = b"".join(struct.pack("<I", len(row[name])) for name, _, size in mds_columns
                     if size is None)
    return sizes + b"".join(row[name] for name, _, _ in mds_columns)


mds_dir = os.path.join(work, "mds")
os.makedirs(mds_dir)
shard_bytes = mds_shard([mds_sample_bytes(row) for row in mds_rows])
at = len(shard_bytes)
with open(os.path.join(mds_dir, "shard.00000.mds"), "wb") as f:
    f.write(shard_bytes)
with open(os.path.join(mds_dir, "index.json"), "w") as f:
    json.dump({"version": 2, "shards": [{
        "column_encodings": [c[1] for c in mds_columns],
        "column_names": [c[0] for c in mds_columns],
        "column_sizes": [c[2] for c in mds_columns], "compression": None, "format": "mds",
        "hashes": [], "raw_data": {"basename": "shard.00000.mds", "bytes": at, "hashes": {}},
        "samples": len(mds_rows), "size_limit": 1 << 26, "version": 2, "zip_data": None}]}, f)
mds_shard = os.path.join(work, "from-mds.pkr")
run("convert", mds_dir, mds_shard)
mds_fields = {f["name"]: f for f in info(mds_shard)["fields"]}
assert {n: f["type"] for n, f in mds_fields.items()} == {
    "caption": "text", "count": "int64[]", "emb": "bytes", "grid": "float32[]", "meta": "json",
    "precise": "json", "score": "float32[]", "small": "int64[]"}, mds_fields
assert mds_fields["grid"]["shape"] == [3], mds_fields["grid"]
mds_out = os.path.join(work, "back-mds")
run("convert", mds_shard, mds_out, "--format", "wds")
mds_back = [members for _, members in sorted(read_tars(mds_out).items())]
for i, (row, out) in enumerate(zip(mds_rows, mds_back)):
    assert out["jpg"] == row["image"] and out["cls"] == str(i % 2).encode()
    assert out["caption"] == row["caption"]
    assert json.loads(out["meta"]) == json.loads(row["meta"])
    assert json.loads(out["precise"]) == struct.unpack("<d", row["precise"])[0]
    assert numpy.load(io.BytesIO(out["count.npy"])).tolist() == [-3 * i]
    assert numpy.load(io.BytesIO(out["small.npy"])).tolist() == [-i]
    assert numpy.load(io.BytesIO(out["score.npy"])).tolist() == [numpy.float32(i / 3)]
    grid = numpy.load(io.BytesIO(out["grid.npy"]))
    assert grid.shape == (2, 3) and numpy.array_equal(grid.ravel(),
                                                      numpy.arange(6, dtype=numpy.float32) * i)
    emb = numpy.load(io.BytesIO(out["emb.npy"]))
    expected = numpy.arange(i + 2, dtype=[numpy.uint8, numpy.float64][i % 2])
    assert emb.dtype == expected.dtype and numpy.array_equal(emb, expected), (emb, expected)


# --- 8. COCO instances over an image folder ------------------------------------------------------
coco_images = os.path.join(work, "coco", "train2017")
os.makedirs(coco_images)
coco = {"images": [], "annotations": [],
        "categories": [{"id": 1, "name": "person", "supercategory": "person"},
                       {"id": 18, "name": "dog", "supercategory": "animal"}]}
for i, image in enumerate(jpegs[:5]):
    name = f"{i + 9:012d}.jpg"
    with open(os.path.join(coco_images, name), "wb") as f:
        f.write(image)
    coco["images"].append({"id": 100 + i, "file_name": name, "width": 64, "height": 48})
annotation_id = 7000
for i in range(4):  # image 104 has no annotations
    for k in range(i + 1):
        annotation_id += 1
        segmentation = ({"counts": [3, 5, 2], "size": [48, 64]} if k == 1 else
                        [[10.5 + k, 12.25, 30.0, 12.25, 30.0, 40.75 + i]])
        coco["annotations"].append({
            "id": annotation_id, "image_id": 100 + i, "category_id": [1, 18][k % 2],
            "bbox": [10.5 + k, 12.25, 19.5 + i, 28.5], "area": 555.75 + k,
            "iscrowd": 1 if k == 1 else 0, "segmentation": segmentation})
coco_json = os.path.join(work, "coco", "instances_train2017.json")
with open(coco_json, "w") as f:
    json.dump(coco, f)
coco_shard = os.path.join(work, "coco.pkr")
run("convert", coco_images, coco_shard, "--annotations", coco_json)
coco_info = info(coco_shard)
assert coco_info["records"] == 5
assert [c["name"] for c in coco_info["options"]["categories"]] == ["person", "dog"]
assert [(f["name"], f["records"]) for f in coco_info["fields"]] == [
    ("boxes", 5), ("category_id", 5), ("iscrowd", 5), ("area", 5), ("annotation_id", 5),
    ("segmentation", 5)], coco_info["fields"]
coco_out = os.path.join(work, "coco-wds")
run("convert", coco_shard, coco_out, "--format", "wds")
for image, (_, out) in zip(coco["images"], sorted(read_tars(coco_out).items())):
    mine = [a for a in coco["annotations"] if a["image_id"] == image["id"]]
    boxes = numpy.load(io.BytesIO(out["boxes.npy"]))
    assert boxes.shape == (len(mine), 4), boxes.shape
    assert numpy.array_equal(boxes, numpy.float32([a["bbox"] for a in mine]).reshape(-1, 4))
    assert numpy.load(io.BytesIO(out["category_id.npy"])).tolist() == \
        [a["category_id"] for a in mine]
    assert numpy.load(io.BytesIO(out["annotation_id.npy"])).tolist() == [a["id"] for a in mine]
    assert numpy.load(io.BytesIO(out["iscrowd.npy"])).tolist() == [a["iscrowd"] for a in mine]
    assert json.loads(out["segmentation"]) == [a["segmentation"] for a in mine]

# An annotation of an image that is not listed, and a box of negative size: named rejects.
coco["annotations"].append({"id": 1, "image_id": 999, "category_id": 1, "bbox": [0, 0, 1, 1],
                            "area": 1, "iscrowd": 0, "segmentation": []})
coco["annotations"].append({"id": 2, "image_id": 104, "category_id": 1, "bbox": [0, 0, -4, 1],
                            "area": 1, "iscrowd": 0, "segmentation": []})
bad_json = os.path.join(work, "coco", "bad.json")
with open(bad_json, "w") as f:
    json.dump(coco, f)
coco_skip, rejects = fail_then_skip(coco_images, "coco", "image_id 999",
                                    extra=("--annotations", bad_json))
assert "image_id 999" in rejects and "negative size" in rejects, rejects
assert info(coco_skip)["records"] == 4


# --- 9. RecordIO's packed labels (im2rec --pack-label) and Caffe's float_data --------------------
def read_recordio(path):
    """Whole records of one part each (the test's images hold no aligned magic), any flag."""
    with open(path, "rb") as f:
        blob = f.read()
    pos, records = 0, []
    while pos < len(blob):
        magic, lrec = struct.unpack_from("<II", blob, pos)
        assert magic == MAGIC and lrec >> 29 == 0, (path, pos)
        length = lrec & ((1 << 29) - 1)
        records.append(blob[pos + 8:pos + 8 + length])
        pos += 8 + length + (-length % 4)
    return records


packed = [[float(i % 2), 0.5 * i, -7.25] for i in range(len(jpegs))]
rec_path = os.path.join(work, "packed.rec")
with open(rec_path, "wb") as f:
    f.write(b"".join(recordio_record(struct.pack("<IfQQ", 3, 0.0, i, 0) +
                                     struct.pack("<3f", *labels) + image)
                     for i, (labels, image) in enumerate(zip(packed, jpegs))))
rec_shard = os.path.join(work, "packed.pkr")
run("convert", rec_path, rec_shard)
assert [(f["name"], f["type"], f["records"]) for f in info(rec_shard)["fields"]] == [
    ("pack_label", "float32[]", len(jpegs))], info(rec_shard)["fields"]
rec_out = os.path.join(work, "packed-out")
run("convert", rec_shard, rec_out, "--format", "recordio")
back_rec = read_recordio(os.path.join(rec_out, "shard-000000.rec"))
for labels, image, data in zip(packed, jpegs, back_rec):
    flag, label = struct.unpack_from("<If", data)
    assert flag == 3 and label == 0.0, (flag, label)
    assert list(struct.unpack_from("<3f", data, 24)) == labels
    assert data[36:] == image
# A field RecordIO cannot express is refused, naming it.
refused = run("convert", shard, os.path.join(work, "wds-as-rec"), "--format", "recordio", ok=False)
assert refused.returncode != 0 and "field 'txt'" in refused.stderr, refused.stderr

try:
    import lmdb
except ImportError:
    lmdb = None
if lmdb is not None:
    def datum(label, data, floats):
        """An encoded caffe.Datum with float_data (6, repeated float, unpacked as Caffe's proto2
        writes it)."""
        return caffe_datum(label, data, True) + b"".join(
            varint((6 << 3) | 5) + struct.pack("<f", value) for value in floats)
    caffe_dir = os.path.join(work, "caffe_lmdb")
    env = lmdb.open(caffe_dir, map_size=1 << 26)
    with env.begin(write=True) as txn:
        for i, image in enumerate(jpegs):
            txn.put(f"{i:08d}_img{i}.jpg".encode(), datum(i % 2, image, [i, 0.25]))
    env.close()
    caffe_shard = os.path.join(work, "caffe.pkr")
    run("convert", caffe_dir, caffe_shard)
    assert [(f["name"], f["records"]) for f in info(caffe_shard)["fields"]] == [
        ("float_data", len(jpegs))], info(caffe_shard)["fields"]
    caffe_out = os.path.join(work, "caffe-wds")
    run("convert", caffe_shard, caffe_out, "--format", "wds")
    for i, (_, out) in enumerate(sorted(read_tars(caffe_out).items())):
        assert numpy.load(io.BytesIO(out["float_data.npy"])).tolist() == [i, 0.25]

print("whole samples: every member, feature and column kept, chosen, grown and checked")
