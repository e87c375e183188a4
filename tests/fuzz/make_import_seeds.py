#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_import_source (tests/fuzz/corpus/fuzz_import_source/): small,
well-formed sources of each kind the target reads, from the formats' published layouts (the same
framing as tests/interop/foreign_formats_check.py: tests/interop/published_formats.py), so
mutations start from inputs that get past the first checks.

Usage: make_import_seeds.py OUT_DIR
An input is one byte (the source kind in its low six bits mod 6; bit 6: raw Caffe pixels as raw
RGB, and TFRecord's CRCs rewritten to match; bit 7: TFRecord's checks deferred) and then the
source's files, joined by SPLIT.
"""
import io
import json
import os
import struct
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
from published_formats import (MAGIC, caffe_datum, example, ir_pack,  # noqa: E402
                               mds_sample, mds_shard, recordio_record, tfrecord_frames)

SPLIT = b"\n--packrec-fuzz-part--\n"
TFRECORD, RECORDIO, WDS, MDS, CAFFE, EXPORT = range(6)
RAW_PIXELS = CRCS_MADE_RIGHT = 0x40
DEFERRED = 0x80

# Not real JPEGs: sources hand bytes on unprobed, and small inputs fuzz faster.
IMAGES = [b"\xff\xd8\xff\xe0fake-jpeg-" + bytes([i]) * (20 + 7 * i) + b"\xff\xd9" for i in range(4)]


def tar(members):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as out:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    # tarfile pads to 10 KiB; two zero blocks end a tar, and smaller inputs fuzz faster. (No
    # member here ends in a zero byte, so stripping zeros stops inside the last one.)
    body = buffer.getvalue().rstrip(b"\0")
    return body + b"\0" * (-len(body) % 512 + 1024)


def mds_entry(name, shard, zstd_name=None, zstd_bytes=0):
    return {"column_encodings": ["str", "jpeg", "int"],
            "column_names": ["filename", "image", "label"],
            "column_sizes": [None, None, 8], "compression": "zstd" if zstd_name else None,
            "format": "mds", "hashes": [], "raw_data": {"basename": name, "bytes": len(shard)},
            "samples": struct.unpack_from("<I", shard)[0], "size_limit": 1 << 26, "version": 2,
            "zip_data": {"basename": zstd_name, "bytes": zstd_bytes} if zstd_name else None}


def seeds():
    labelled = [example({"image/encoded": image, "image/class/label": i,
                         "image/filename": f"img{i}.jpg".encode()})
                for i, image in enumerate(IMAGES)]
    unlabelled = example({"image/encoded": IMAGES[3]})
    yield "tfrecord", TFRECORD, [tfrecord_frames(labelled[:3] + [unlabelled])]
    yield "tfrecord-deferred", TFRECORD | DEFERRED, [tfrecord_frames(labelled)]
    yield ("tfrecord-crcs-made-right", TFRECORD | CRCS_MADE_RIGHT | DEFERRED,
           [tfrecord_frames(labelled)])

    # The last image holds the magic at an aligned offset: a record in three parts.
    split = IMAGES[3][:4] + struct.pack("<I", MAGIC) + IMAGES[3][4:12] + struct.pack("<I", MAGIC)
    records = [ir_pack(i, i, image) for i, image in enumerate(IMAGES[:3] + [split + IMAGES[3]])]
    rec = b"".join(recordio_record(r) for r in records)
    lst = b"".join(f"{i}\t{i}.000000\tclass{i}/img{i}.jpg\n".encode() for i in range(4))
    yield "recordio", RECORDIO, [rec]
    yield "recordio-lst", RECORDIO, [rec, lst]

    first = tar([("s0.jpg", IMAGES[0]), ("s0.cls", b"0"), ("s1.jpg", IMAGES[1]),
                 ("s1.json", b'{"label": 1}'), ("s1.txt", b"a caption")])
    second = tar([("d/s2.png", IMAGES[2]), ("d/s2.cls.txt", b"2\n"), ("s3.jpeg", IMAGES[3])])
    yield "wds", WDS, [first]
    yield "wds-two-tars", WDS, [first, second]

    samples = [mds_sample(f"img{i}.jpg".encode(), image, i) for i, image in enumerate(IMAGES)]
    shard0, shard1 = mds_shard(samples[:2]), mds_shard(samples[2:])
    zstd = subprocess.run(["zstd", "-q", "-c"], input=shard1, capture_output=True,
                          check=True).stdout
    index = {"shards": [mds_entry("shard.00000.mds", shard0)], "version": 2}
    yield "mds", MDS, [json.dumps(index).encode(), shard0]
    index["shards"].append(mds_entry("shard.00001.mds", shard1, "shard.00001.mds.zstd", len(zstd)))
    yield "mds-zstd", MDS, [json.dumps(index).encode(), shard0, zstd]

    raw_color = bytes(range(3 * 2 * 2))
    values = [caffe_datum(0, IMAGES[0], True), caffe_datum(1, raw_color, False, 3, 2, 2),
              caffe_datum(2, bytes(range(6)), False, 1, 2, 3)]
    yield "caffe", CAFFE, values
    yield "caffe-raw-rgb", CAFFE | RAW_PIXELS, values

    manifest = {"format": "wds", "records": 4, "rejected": 0, "classes": ["a", "b"],
                "files": [{"files": ["train-00000.tar"], "first_record": 0, "records": 2,
                           "bytes": len(first)},
                          {"files": ["train-00001.tar"], "first_record": 2, "records": 2,
                           "bytes": len(second)}]}
    yield "export-dir", EXPORT, [json.dumps(manifest).encode(), first, second]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, choice, parts in seeds():
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes([choice]) + SPLIT.join(parts))


if __name__ == "__main__":
    main()
