"""Records with fields beside the image: an image folder with side files, read back through
packrec.open (sample, field, labels) and, independently of packrec, by a small reader of the
documented shard layout (docs/formats/shard.md, version 2; docs/formats/fields.md)."""
import json
import os
import struct

import numpy
import pytest
import xxhash
from PIL import Image

import packrec


@pytest.fixture(scope="module")
def side_file_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("fields") / "tree"
    for label, cls in enumerate(["bird", "fish"]):
        os.makedirs(root / cls)
        for i in range(5):
            stem = root / cls / f"{i:04d}"
            Image.new("RGB", (24 + i, 16), (40 * i, 80, 120)).save(f"{stem}.jpg", quality=90)
            if i != 3:
                (root / cls / f"{i:04d}.txt").write_text(f"a {cls} \u00e9t\u00e9 {i}\n", encoding="utf-8")
            (root / cls / f"{i:04d}.json").write_text(json.dumps({"i": i, "boxes": [[0, 0, i, i]]}))
            Image.new("L", (24 + i, 16), i).save(f"{stem}.mask.png")
    return root


@pytest.fixture(scope="module")
def field_dataset(side_file_tree, tmp_path_factory):
    out = tmp_path_factory.mktemp("fields-ds") / "ds"
    packrec.convert(str(side_file_tree), str(out))
    return out


def expected_records(root):
    """(key, label, {field: bytes}) in ImageFolder order, read from the files themselves."""
    records = []
    for label, cls in enumerate(sorted(os.listdir(root))):
        for name in sorted(n for n in os.listdir(root / cls) if n.endswith(".jpg")):
            stem = name[: -len(".jpg")]
            fields = {}
            for suffix in ("json", "mask.png", "txt"):
                path = root / cls / f"{stem}.{suffix}"
                fields[suffix] = path.read_bytes() if path.exists() else None
            records.append((f"{cls}/{name}", label, fields))
    return records


def test_fields_read_through_packrec(side_file_tree, field_dataset):
    ds = packrec.open(field_dataset)
    assert [f["name"] for f in ds.fields] == ["json", "mask.png", "txt"]
    assert [f["type"] for f in ds.fields] == ["json", "bytes", "text"]
    expected = expected_records(side_file_tree)
    assert ds.labels.dtype == numpy.int64
    assert ds.labels.tolist() == [label for _, label, _ in expected]
    captions = ds.field("txt")
    assert captions == [None if f["txt"] is None else f["txt"].decode("utf-8") for _, _, f in expected]
    assert [json.loads(text) for text in ds.field("json")] == [json.loads(f["json"]) for _, _, f in expected]
    assert ds.field("mask.png") == [f["mask.png"] for _, _, f in expected]
    for i, (key, label, fields) in enumerate(expected):
        sample = ds.sample(i)
        assert (sample["key"], sample["label"]) == (key, label)
        assert sample["json"] == json.loads(fields["json"])
        assert sample["mask.png"] == fields["mask.png"]
        assert sample["image"] == (side_file_tree / key).read_bytes()
    with pytest.raises(KeyError, match="no field 'caption'"):
        ds.field("caption")
    assert ds.info()["fields"] == ds.fields


def read_shard_fields(dataset):
    """Every record's (key, label, [field bytes or None]) from the files, by the documented
    layout alone: manifest, header, footer, 80-byte index entries, field blocks; every checksum
    checked."""
    manifest = json.loads((dataset / "manifest.json").read_text())
    assert manifest["format_version"] == 2
    field_count = len(manifest["fields"])
    records = []
    for shard in manifest["shards"]:
        data = (dataset / shard["file"]).read_bytes()
        assert data[:8] == b"\x89PKR\r\n\x1a\n" and struct.unpack_from("<I", data, 8)[0] == 2
        keys_offset, keys_size, index_offset, count, first = struct.unpack_from("<5Q", data, len(data) - 64)
        assert index_offset == len(data) - 64 - 80 * count
        for local in range(count):
            at = index_offset + 80 * local
            offset, stored, raw, checksum, label, key_offset = struct.unpack_from("<4Q2I", data, at)
            key_size = struct.unpack_from("<H", data, at + 48)[0]
            fields_offset, fields_size = struct.unpack_from("<QI", data, at + 56)
            fields_xxh64 = struct.unpack_from("<Q", data, at + 72)[0]
            index = first + local
            assert xxhash.xxh64_intdigest(data[offset:offset + stored], seed=index) == checksum
            block = data[fields_offset:fields_offset + fields_size]
            assert fields_offset % 8 == 0
            assert xxhash.xxh64_intdigest(block, seed=index) == fields_xxh64
            values = []
            for f in range(field_count):
                value_offset, value_size, value_xxh64 = struct.unpack_from("<IIQ", block, 16 * f)
                if value_offset == 0xFFFFFFFF:
                    values.append(None)
                    continue
                assert value_offset % 8 == 0
                value = block[value_offset:value_offset + value_size]
                assert xxhash.xxh64_intdigest(value) == value_xxh64
                values.append(value)
            key = data[keys_offset + key_offset:keys_offset + key_offset + key_size].decode()
            records.append((key, label, values))
    return manifest, records


def test_an_independent_reader_of_the_documented_layout_reads_every_field(side_file_tree, field_dataset):
    manifest, records = read_shard_fields(field_dataset)
    names = [f["name"] for f in manifest["fields"]]
    expected = expected_records(side_file_tree)
    assert len(records) == len(expected)
    for (key, label, values), (want_key, want_label, want_fields) in zip(records, expected):
        assert (key, label) == (want_key, want_label)
        assert dict(zip(names, values)) == want_fields
