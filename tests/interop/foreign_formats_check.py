#!/usr/bin/env python3
"""packrec against other tools' container formats, checked by writers and readers written here
from the published framing, not from packrec's code.

Usage: foreign_formats_check.py PACKREC_CLI WORK_DIR

1. Independent writers build WebDataset tars (Python's tarfile), TFRecords (framing + masked
   CRC-32C + a hand-encoded tf.Example), MXNet RecordIO (dmlc framing, im2rec's IRHeader, records
   split at an aligned magic), MDS (index.json + shards, one zstd-compressed) and a Caffe LMDB
   (python-lmdb + hand-encoded caffe.Datum, encoded and raw); packrec imports each and its
   records must equal what was written.
2. packrec exports (wds, tfrecord, recordio) are read by the independent readers here and by GNU
   tar; tree -> X -> shard -> extract must equal the tree byte for byte.
3. Damaged sources (flipped CRC, truncated tar member, bad magic) fail naming the file and byte
   offset, and convert the rest under --on-error skip.
Exit 77 (skipped) without python3-lmdb.
"""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile

import cli_runner
from published_formats import (MAGIC, caffe_datum, example, ir_pack, mds_sample, mds_shard,
                               parse_example, read_recordio, read_tfrecord, recordio_record,
                               tfrecord_frames)

try:
    import lmdb
except ImportError:
    print("skipped: python3-lmdb is not installed")
    sys.exit(77)

cli, work = sys.argv[1], sys.argv[2]
run = cli_runner.start(cli, work)


# --- the images: a tree made by packrec synth (real JPEGs) ----------------------------------------
tree = os.path.join(work, "tree")
run("synth", tree, "--classes", "3", "--per-class", "6", "--seed", "11")
classes = sorted(os.listdir(tree))
items = []  # (key, label, bytes)
for label, name in enumerate(classes):
    for file in sorted(os.listdir(os.path.join(tree, name))):
        with open(os.path.join(tree, name, file), "rb") as f:
            items.append((f"{name}/{file}", label, f.read()))
# An image whose bytes hold RecordIO's magic at an aligned offset, so the record is split.
spliced = bytearray(items[0][2])
at = len(spliced) - 200
at -= (24 + at) % 4  # 4-aligned within the record (after the 24-byte IRHeader)
spliced[at:at + 4] = struct.pack("<I", MAGIC)  # inside the entropy data: still a JPEG to probe


def check_import(source, expected, *flags, expect_classes=None):
    dataset = source.rstrip("/") + ".pkr"
    run("convert", "-q", source, dataset, *flags)
    info = json.loads(run("info", dataset, "--json").stdout)
    assert info["records"] == len(expected), (source, info["records"], len(expected))
    if expect_classes is not None:
        assert info["classes"] == expect_classes, (source, info["classes"])
    labels = {}
    verify = run("verify", dataset)
    assert verify.returncode == 0
    out = dataset + ".x"
    run("extract", dataset, out)
    for key, label, data in expected:
        with open(os.path.join(out, key), "rb") as f:
            assert f.read() == data, (source, key)
        labels[key] = label
    return dataset, labels


# 1a. WebDataset tars written by tarfile, in two shards, read through a brace pattern.
wds_dir = os.path.join(work, "wds")
os.makedirs(wds_dir)
for shard in range(2):
    with tarfile.open(os.path.join(wds_dir, f"train-{shard:06d}.tar"), "w",
                      format=tarfile.USTAR_FORMAT) as tar:
        for i, (key, label, data) in enumerate(items[shard::2]):
            stem = f"{classes[label]}/sample{shard}_{i:04d}"
            for ext, payload in (("jpg", data), ("cls", str(label).encode())):
                member = tarfile.TarInfo(f"{stem}.{ext}")
                member.size = len(payload)
                tar.addfile(member, io.BytesIO(payload))
wds_expected = []
for shard in range(2):
    for i, (key, label, data) in enumerate(items[shard::2]):
        wds_expected.append((f"{classes[label]}/sample{shard}_{i:04d}.jpg", label, data))
check_import(os.path.join(wds_dir, "train-{000000..000001}.tar"), wds_expected)
check_import(os.path.join(wds_dir, "train-*.tar"), wds_expected, "--from", "wds")

# 1b. TFRecords with the ImageNet keys (and one file without image/filename).
tf_dir = os.path.join(work, "tfrecord")
os.makedirs(tf_dir)
tf_records = [example({"image/encoded": data, "image/class/label": label,
                       "image/filename": key.encode(),
                       "image/class/text": classes[label].encode()})
              for key, label, data in items]
with open(os.path.join(tf_dir, "train-00000-of-00001"), "wb") as f:
    f.write(tfrecord_frames(tf_records))
dataset, _ = check_import(os.path.join(tf_dir, "train-00000-of-00001"), items,
                          expect_classes=classes)

# 1c. RecordIO as im2rec writes it (.rec + .idx + .lst), one record split at a magic.
rec_dir = os.path.join(work, "recordio")
os.makedirs(rec_dir)
rec_items = [(items[0][0], items[0][1], bytes(spliced))] + items[1:]
with open(os.path.join(rec_dir, "data.rec"), "wb") as rec, \
        open(os.path.join(rec_dir, "data.idx"), "w") as idx, \
        open(os.path.join(rec_dir, "data.lst"), "w") as lst:
    for ident, (key, label, data) in enumerate(rec_items):
        idx.write(f"{ident}\t{rec.tell()}\n")
        lst.write(f"{ident}\t{label:f}\t{key}\n")
        rec.write(recordio_record(ir_pack(label, ident, data)))
with open(os.path.join(rec_dir, "data.rec"), "rb") as f:
    assert f.read().count(struct.pack("<I", MAGIC)) == len(rec_items) + 1, "no record was split"
check_import(os.path.join(rec_dir, "data.rec"), rec_items)

# 1d. MDS: columns sorted by name, variable sizes in the sample header; shard 1 zstd-compressed.
mds_dir = os.path.join(work, "mds")
os.makedirs(mds_dir)
columns = [("filename", "str", None), ("image", "jpeg", None), ("label", "int", 8)]
shards = []
for shard, chunk in enumerate((items[:10], items[10:])):
    samples = [mds_sample(key.encode(), data, label) for key, label, data in chunk]
    blob = mds_shard(samples)
    raw_name = f"shard.{shard:05d}.mds"
    entry = {"column_encodings": [c[1] for c in columns], "column_names": [c[0] for c in columns],
             "column_sizes": [c[2] for c in columns], "format": "mds", "hashes": [],
             "raw_data": {"basename": raw_name, "bytes": len(blob), "hashes": {}},
             "samples": len(samples), "size_limit": 1 << 26, "version": 2,
             "compression": None, "zip_data": None}
    if shard == 1:
        zipped = subprocess.run(["zstd", "-q", "-c", "-7"], input=blob, capture_output=True,
                                check=True).stdout
        with open(os.path.join(mds_dir, raw_name + ".zstd"), "wb") as f:
            f.write(zipped)
        entry["compression"] = "zstd:7"
        entry["zip_data"] = {"basename": raw_name + ".zstd", "bytes": len(zipped), "hashes": {}}
    else:
        with open(os.path.join(mds_dir, raw_name), "wb") as f:
            f.write(blob)
    shards.append(entry)
with open(os.path.join(mds_dir, "index.json"), "w") as f:
    json.dump({"shards": shards, "version": 2}, f)
check_import(mds_dir, items)

# 1e. A Caffe LMDB as convert_imageset writes it: "%08d_" + path keys, Datum values, encoded;
# plus one raw-pixel Datum (2 x 2 BGR planes) that must come back as a lossless PNG.
caffe_dir = os.path.join(work, "caffe")
env = lmdb.open(caffe_dir, map_size=1 << 26)
with env.begin(write=True) as txn:
    for i, (key, label, data) in enumerate(items):
        datum = caffe_datum(label, data, encoded=True)
        txn.put(f"{i:08d}_{key}".encode(), datum)
    planes = bytes([10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120])  # B, G, R planes
    raw = caffe_datum(1, planes, encoded=False, channels=3, height=2, width=2)
    txn.put(f"{len(items):08d}_raw/pixels".encode(), raw)
env.close()
caffe_ds = os.path.join(work, "caffe.pkr")
run("convert", "-q", caffe_dir, caffe_ds)
run("extract", caffe_ds, caffe_ds + ".x")
for key, label, data in items:
    with open(os.path.join(caffe_ds + ".x", key), "rb") as f:
        assert f.read() == data, key
png = os.path.join(caffe_ds + ".x", "raw/pixels.png")
from PIL import Image  # noqa: E402  (Debian python3-pil, a decoder we did not write)
pixels = list(Image.open(png).convert("RGB").getdata())
assert pixels == [(90, 50, 10), (100, 60, 20), (110, 70, 30), (120, 80, 40)], pixels

# 2. Exports, read back by the readers above and by GNU tar; round trips equal the tree.
for fmt in ("wds", "tfrecord", "recordio"):
    out = os.path.join(work, f"export-{fmt}")
    run("convert", "-q", tree, out, "--format", fmt, "--shard-size", "100000")
    back = out + ".pkr"
    run("convert", "-q", out, back)
    run("extract", back, back + ".x")
    diff = subprocess.run(["diff", "-r", tree, back + ".x"], capture_output=True, text=True)
    assert diff.returncode == 0, f"{fmt} round trip differs:\n{diff.stdout}"
    info = json.loads(run("info", back, "--json").stdout)
    if fmt != "recordio":
        assert info["classes"] == classes, (fmt, info["classes"])
    files = sorted(os.listdir(out))
    if fmt == "wds":
        tars = [f for f in files if f.endswith(".tar")]
        assert len(tars) > 1, files
        seen = []
        for name in tars:
            listing = subprocess.run(["tar", "-tf", os.path.join(out, name)], capture_output=True,
                                     text=True, check=True).stdout.split()
            assert len(listing) % 3 == 0 and all(
                m.split(".", 1)[1] in ("jpg", "cls", "json") for m in listing), listing
            target = os.path.join(work, f"gnu-tar-{name}")
            os.makedirs(target)
            subprocess.run(["tar", "-xf", os.path.join(out, name), "-C", target], check=True)
            for member in listing:
                stem, ext = member.split(".", 1)
                if ext == "json":
                    with open(os.path.join(target, member)) as f:
                        meta = json.load(f)
                    with open(os.path.join(target, stem + ".jpg"), "rb") as f:
                        image = f.read()
                    with open(os.path.join(target, stem + ".cls")) as f:
                        label = int(f.read())
                    assert meta["label"] == label and meta["class"] == classes[label]
                    seen.append((meta["key"], label, image))
        assert sorted(seen) == sorted(items), "GNU tar extraction differs from the tree"
    elif fmt == "tfrecord":
        seen = []
        for name in (f for f in files if f.endswith(".tfrecord")):
            records = read_tfrecord(os.path.join(out, name))
            with open(os.path.join(out, name[:-len(".tfrecord")] + ".idx")) as f:
                index = [tuple(map(int, line.split())) for line in f]
            assert index == [(offset, size) for offset, size, _ in records], name
            for _, _, data in records:
                features = parse_example(data)
                assert features["image/format"] == b"jpeg"
                assert features["image/class/text"].decode() == classes[
                    features["image/class/label"]]
                seen.append((features["image/filename"].decode(), features["image/class/label"],
                             features["image/encoded"]))
        assert seen == items, "the TFRecord export differs from the tree"
    else:
        seen = []
        for name in (f for f in files if f.endswith(".rec")):
            records = read_recordio(os.path.join(out, name))
            stem = os.path.join(out, name[:-len(".rec")])
            with open(stem + ".idx") as f:
                index = [tuple(map(int, line.split("\t"))) for line in f]
            assert index == [(ident, offset) for offset, ident, _, _ in records], name
            with open(stem + ".lst") as f:
                keys = {int(line.split("\t")[0]): line.rstrip("\n").split("\t")[2] for line in f}
            for _, ident, label, image in records:
                seen.append((keys[ident], int(label), image))
        assert seen == items, "the RecordIO export differs from the tree"

# 3. Damaged sources: named (file, byte offset), the rest converted under --on-error skip.
def check_damaged(source, expect_in_error, expect_records, *flags):
    failed = run("convert", "-q", source, source + ".bad.pkr", *flags, ok=False)
    assert failed.returncode != 0, source
    for text in expect_in_error:
        assert text in failed.stderr, (text, failed.stderr)
    assert not os.path.exists(source + ".bad.pkr"), "a failed import left output behind"
    skipped = source + ".skip.pkr"
    shutil.rmtree(skipped, ignore_errors=True)
    run("convert", "-q", source, skipped, "--on-error", "skip", *flags)
    info = json.loads(run("info", skipped, "--json").stdout)
    assert info["records"] == expect_records, (source, info["records"], expect_records)
    with open(os.path.join(skipped, "rejects.tsv")) as f:
        return f.read()


damaged = os.path.join(work, "damaged")
os.makedirs(damaged)
# TFRecord: flip a byte inside record 3's data -> its data CRC fails, the other 17 convert.
frames = bytearray(tfrecord_frames(tf_records))
offsets, pos = [], 0
while pos < len(frames):
    offsets.append(pos)
    (length,) = struct.unpack_from("<Q", frames, pos)
    pos += 16 + length
frames[offsets[3] + 12 + 40] ^= 0x01
bad_tf = os.path.join(damaged, "flipped.tfrecord")
with open(bad_tf, "wb") as f:
    f.write(frames)
rejects = check_damaged(bad_tf, [bad_tf, f"record 3 at byte {offsets[3]}", "CRC"], len(items) - 1)
assert f"record 3 at byte {offsets[3]}" in rejects, rejects
# TFRecord: a damaged length CRC ends the file at that record (3 records before it convert).
frames = bytearray(tfrecord_frames(tf_records))
frames[offsets[3] + 8] ^= 0xFF
with open(bad_tf, "wb") as f:
    f.write(frames)
check_damaged(bad_tf, ["length CRC"], 3)
# WebDataset: a tar cut in the middle of a member's data.
whole = os.path.join(wds_dir, "train-000000.tar")
with open(whole, "rb") as f:
    blob = f.read()
with tarfile.open(whole) as tar:
    members = tar.getmembers()
cut_member = members[6]  # sample 3's jpg: samples 0-2 convert
bad_tar = os.path.join(damaged, "truncated.tar")
with open(bad_tar, "wb") as f:
    f.write(blob[:cut_member.offset_data + cut_member.size // 2])
check_damaged(bad_tar, [bad_tar, "sample 3", "truncated"], 3)
# RecordIO: record 2's magic overwritten -> named, reading resumes at the next magic.
with open(os.path.join(rec_dir, "data.idx")) as f:
    rec_offsets = [int(line.split("\t")[1]) for line in f]
with open(os.path.join(rec_dir, "data.rec"), "rb") as f:
    blob = bytearray(f.read())
blob[rec_offsets[2]:rec_offsets[2] + 4] = b"JUNK"
bad_rec = os.path.join(damaged, "badmagic.rec")
with open(bad_rec, "wb") as f:
    f.write(blob)
check_damaged(bad_rec, [bad_rec, f"at byte {rec_offsets[2]}", "bad magic"], len(items) - 1)

# MDS: shard 0 cut short (its sample table points past the end) -> that shard is one reject
# naming it; shard 1 (zstd) converts. Then a sample whose column size runs past its end.
bad_mds = os.path.join(damaged, "mds")
shutil.copytree(mds_dir, bad_mds)
shard0 = os.path.join(bad_mds, "shard.00000.mds")
with open(shard0, "rb") as f:
    blob = bytearray(f.read())
with open(shard0, "wb") as f:
    f.write(blob[:len(blob) - 100])
rejects = check_damaged(bad_mds, [shard0, "past the end"], len(items) - 10)
(first,) = struct.unpack_from("<I", blob, 4)
struct.pack_into("<I", blob, first + 4, 1 << 30)  # sample 0's image size: far past its end
with open(shard0, "wb") as f:
    f.write(blob)
rejects = check_damaged(bad_mds, [f"{shard0} record 0 at byte {first}", "runs past"],
                        len(items) - 1)
# Caffe LMDB: one value that is not a Datum (a truncated length-delimited field) -> that entry.
bad_caffe = os.path.join(damaged, "caffe")
env = lmdb.open(bad_caffe, map_size=1 << 26)
with env.begin(write=True) as txn:
    for i, (key, label, data) in enumerate(items):
        datum = caffe_datum(label, data, encoded=True)
        if i == 4:
            datum = datum[:50]
        txn.put(f"{i:08d}_{key}".encode(), datum)
env.close()
check_damaged(bad_caffe, [f"entry 4 (key 00000004_{items[4][0]})", "not a caffe.Datum"],
              len(items) - 1)

print(f"foreign formats: 5 importers, 3 exporters, 7 damaged sources checked "
      f"({len(items)} images)")
