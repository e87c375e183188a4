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
from published_formats import (MAGIC, caffe_datum, example, field, ir_pack,  # noqa: E402
                               mds_sample, mds_shard, recordio_record, tfrecord_frames, varint)

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
    yield from field_seeds()


def npy(descr, shape, data):
    """NumPy format 1.0, as numpy.save writes it."""
    header = ("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" %
              (descr, "".join(f"{n}, " for n in shape).rstrip(" ") if len(shape) > 1 else
               f"{shape[0]},")).encode()
    header += b" " * (-(10 + len(header) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data


def field_seeds():
    """Sources whose records carry fields beside the image (issue 32)."""
    boxes = npy("<f4", (2, 4), struct.pack("<8f", *range(8)))
    ids = npy("<i8", (3,), struct.pack("<3q", 1, -2, 3))
    doubles = npy("<f8", (2,), struct.pack("<2d", 0.5, 1.5))
    wds = tar([("a.jpg", IMAGES[0]), ("a.cls", b"0"), ("a.txt", b"caption \xc3\xa9"),
               ("a.json", b'{"url": "http://x", "key": "a1"}'), ("a.npy", boxes),
               ("a.ids.npy", ids), ("a.seg.bin", b"\x00\x01"),
               ("b.jpg", IMAGES[1]), ("b.cls", b"1"), ("b.npy", doubles), ("b.txt", b"\xff"),
               ("c.jpg", IMAGES[2]), ("c.json", b"[1, 2]"), ("c.image", b"x")])
    yield "wds-fields", WDS, [wds]

    def feature_list(kind, payload):
        return field(kind, 2, field(1, 2, payload))

    def features(entries):
        body = b""
        for name, feature in entries.items():
            body += field(1, 2, field(1, 2, name.encode()) + field(2, 2, feature))
        return field(1, 2, body)

    records = []
    for i, image in enumerate(IMAGES):
        records.append(features({
            "image/encoded": feature_list(1, image),
            "image/class/label": field(3, 2, field(1, 2, varint(i))),
            "image/object/bbox/xmin": field(2, 2, field(1, 2, struct.pack("<2f", 0.5, i))),
            "image/object/class/text": field(1, 2, field(1, 2, b"car") + field(1, 2, b"dog")),
            "caption": feature_list(1, b"text" if i != 2 else b"\xff\xfe"),
            "ids": field(3, 2, field(1, 2, varint(i) + varint(2**40))),
            "empty": field(1, 2, b""),
            "odd": (field(3, 2, field(1, 2, varint(1))) if i % 2 else
                    field(2, 2, field(1, 2, struct.pack("<f", 1.0)))),
        }))
    yield "tfrecord-features", TFRECORD | CRCS_MADE_RIGHT | DEFERRED, [tfrecord_frames(records)]

    columns = [("caption", "str", None), ("count", "int", 8), ("emb", "ndarray", None),
               ("grid", "ndarray:float32:2,2", 16), ("image", "jpeg", None),
               ("label", "int", 8), ("meta", "json", None), ("precise", "float64", 8),
               ("small", "float16", 2)]
    samples = []
    for i, image in enumerate(IMAGES[:3]):
        row = {"caption": b"mds", "count": struct.pack("<q", -i),
               "emb": bytes([34, (1 << 2) | 0, 2]) + struct.pack("<2f", 1, 2),
               "grid": struct.pack("<4f", 1, 2, 3, i), "image": image,
               "label": struct.pack("<q", i), "meta": b'{"a": 1}',
               "precise": struct.pack("<d", 0.1 * i), "small": struct.pack("<H", 0x3c00 + i)}
        sizes = b"".join(struct.pack("<I", len(row[n])) for n, _, size in columns if size is None)
        samples.append(sizes + b"".join(row[n] for n, _, _ in columns))
    shard = mds_shard(samples)
    entry = mds_entry("shard.00000.mds", shard)
    entry.update({"column_names": [c[0] for c in columns],
                  "column_encodings": [c[1] for c in columns],
                  "column_sizes": [c[2] for c in columns]})
    yield "mds-columns", MDS, [json.dumps({"shards": [entry], "version": 2}).encode(), shard]

    packed = [struct.pack("<IfQQ", 3, 0.0, i, 0) + struct.pack("<3f", i, 0.5, -1) + image
              for i, image in enumerate(IMAGES)]
    yield "recordio-pack-label", RECORDIO, [b"".join(recordio_record(r) for r in packed)]

    with_floats = caffe_datum(0, IMAGES[0], True) + b"".join(
        varint((6 << 3) | 5) + struct.pack("<f", v) for v in (0.5, 2.0))
    yield "caffe-float-data", CAFFE, [with_floats, caffe_datum(1, IMAGES[1], True)]

    manifest = {"format": "wds", "records": 1, "rejected": 0, "classes": [],
                "fields": [{"name": "txt", "type": "text", "suffix": "txt", "shape": []},
                           {"name": "boxes", "type": "float32[]", "suffix": "", "shape": [4]}],
                "files": [{"files": ["train-00000.tar"], "first_record": 0, "records": 1,
                           "bytes": 0}]}
    export = tar([("000000000.jpg", IMAGES[0]), ("000000000.cls", b"0"),
                   ("000000000.txt", b"t"), ("000000000.boxes.npy", boxes)])
    yield "export-dir-fields", EXPORT, [json.dumps(manifest).encode(), export]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, choice, parts in seeds():
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes([choice]) + SPLIT.join(parts))


if __name__ == "__main__":
    main()
