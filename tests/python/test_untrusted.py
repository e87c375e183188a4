"""What packrec is told, checked before it is believed: a manifest that lies about its records
(types, order, label_count, classes) with its checksum recomputed, as any tool or bug could write
it; field values Python cannot read; keys that are not UTF-8 in error messages. Each is a named
packrec.Error with its record index, from reads and from verify: never a crash, never garbage
numbers, never a bare UnicodeDecodeError, JSONDecodeError or RecursionError."""
import json
import os
import shutil
import subprocess

import pytest
import xxhash
from PIL import Image

import packrec

CLI = os.environ.get("PACKREC_CLI", "packrec")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """Images with a caption (text), a JSON and a mask (bytes) beside each; two classes."""
    root = tmp_path_factory.mktemp("untrusted") / "tree"
    for cls in ("bird", "fish"):
        os.makedirs(root / cls)
        for i in range(4):
            stem = root / cls / f"{i:04d}"
            Image.new("RGB", (24, 16), (40 * i, 80, 120)).save(f"{stem}.jpg", quality=90)
            # 13 + len(cls) bytes: never a whole number of int64 or float32 elements
            (root / cls / f"{i:04d}.txt").write_text(f"caption {i} of {cls}!", encoding="utf-8")
            (root / cls / f"{i:04d}.json").write_text(json.dumps({"i": i}))
            Image.new("L", (24, 16), i).save(f"{stem}.mask.bin", format="PNG")
            if i < 2:  # a second text field, in fewer records than the caption
                (root / cls / f"{i:04d}.cls").write_text(str(i))
    return root


@pytest.fixture(scope="module")
def dataset(tree, tmp_path_factory):
    out = tmp_path_factory.mktemp("untrusted-ds") / "ds"
    packrec.convert(str(tree), str(out))
    return out


def lie(dataset, tmp_path, change):
    """A copy of `dataset` whose manifest `change` edits, its manifest_xxh64 recomputed the way
    docs/formats/shard.md says (keys sorted, 2-space indent, without the field)."""
    copy = tmp_path / "lying"
    shutil.copytree(dataset, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    change(manifest)
    manifest.pop("manifest_xxh64")
    body = json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False)
    manifest["manifest_xxh64"] = format(xxhash.xxh64(body.encode()).intdigest(), "016x")
    (copy / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False))
    return copy


def field_named(manifest, name):
    return next(f for f in manifest["fields"] if f["name"] == name)


def retype(name, new_type):
    return lambda manifest: field_named(manifest, name).update(type=new_type)


def reverse_fields(manifest):
    manifest["fields"].reverse()


def cut_label_count(manifest):
    manifest["label_count"] = 1


def cut_classes(manifest):
    manifest["classes"] = manifest["classes"][:1]


LIES = {
    "text declared int64[]": (retype("txt", "int64[]"), "txt"),
    "text declared float32[]": (retype("txt", "float32[]"), "txt"),
    "bytes declared json": (retype("mask.bin", "json"), "mask.bin"),
    "bytes declared text": (retype("mask.bin", "text"), "mask.bin"),
    "fields reordered": (reverse_fields, None),
}


def test_the_honest_dataset_verifies_and_reads(dataset):
    assert packrec.open(dataset).verify()["ok"]
    assert subprocess.run([CLI, "verify", str(dataset)], capture_output=True).returncode == 0


@pytest.mark.parametrize("what", sorted(LIES))
def test_a_schema_lie_is_a_named_error_from_reads_and_verify(dataset, tmp_path, what):
    change, field = LIES[what]
    lying = lie(dataset, tmp_path, change)
    ds = packrec.open(lying)
    with pytest.raises(packrec.errors.CorruptionError) as raised:
        for i in range(len(ds)):
            ds.sample(i)
    assert raised.value.record_index is not None
    assert "does not hold what the schema declares" in str(raised.value), raised.value
    names = [f["name"] for f in ds.fields] if field is None else [field]
    with pytest.raises(packrec.errors.CorruptionError):
        for name in names:
            ds.field(name)
    report = ds.verify()
    assert not report["ok"]
    assert any("schema declares" in p["message"] and p["record_index"] is not None
               for p in report["problems"]), report
    run = subprocess.run([CLI, "verify", str(lying)], capture_output=True, text=True)
    assert run.returncode == 5, run.stdout + run.stderr
    assert "schema declares" in run.stdout + run.stderr


def test_fields_of_one_type_reordered_with_their_counts_are_named_by_verify(dataset, tmp_path):
    """Two text fields swapped in the schema (their counts with them): every value still is
    text, so only the count of records holding each field can tell. A swap of names alone, the
    counts left in place, cannot be seen: the records hold their values by position."""
    def swap(manifest):
        names = [f["name"] for f in manifest["fields"]]
        a, b = names.index("cls"), names.index("txt")
        fields, counts = manifest["fields"], manifest["field_records"]
        fields[a], fields[b] = fields[b], fields[a]
        counts[a], counts[b] = counts[b], counts[a]
    lying = lie(dataset, tmp_path, swap)
    report = packrec.open(lying).verify()
    assert not report["ok"]
    assert any("field_records says" in p["message"] for p in report["problems"]), report
    run = subprocess.run([CLI, "verify", str(lying)], capture_output=True, text=True)
    assert run.returncode == 5 and "field_records" in run.stdout + run.stderr


def test_a_cut_label_count_is_named_by_reads_and_verify(dataset, tmp_path):
    lying = lie(dataset, tmp_path, cut_label_count)
    ds = packrec.open(lying)
    with pytest.raises(packrec.errors.CorruptionError) as raised:
        for i in range(len(ds)):
            ds[i]
    assert raised.value.record_index is not None and "label_count 1" in str(raised.value)
    run = subprocess.run([CLI, "verify", str(lying)], capture_output=True, text=True)
    assert run.returncode == 5 and "label_count 1" in run.stdout + run.stderr, run.stdout + run.stderr


def test_a_cut_class_list_is_named_by_verify(dataset, tmp_path):
    lying = lie(dataset, tmp_path, cut_classes)
    report = packrec.open(lying).verify()
    assert not report["ok"]
    assert any("lists 1 classes" in p["message"] for p in report["problems"]), report
    run = subprocess.run([CLI, "verify", str(lying)], capture_output=True, text=True)
    assert run.returncode == 5, run.stdout + run.stderr


@pytest.mark.parametrize("value, why", [
    (b"\xef\xbb\xbf" + json.dumps({"a": 1}).encode(), "byte-order mark"),
    (b"[" * 2000 + b"]" * 2000, "nested more than 512"),
])
def test_json_that_python_cannot_read_is_refused_at_convert(tmp_path, value, why):
    tree = tmp_path / "tree"
    os.makedirs(tree / "a")
    for i in range(2):
        Image.new("RGB", (16, 16), (i, 2, 3)).save(tree / "a" / f"{i}.jpg")
        (tree / "a" / f"{i}.json").write_bytes(value if i == 1 else b'{"ok": true}')
    run = subprocess.run([CLI, "convert", str(tree), str(tmp_path / "ds.pkr"), "--on-error", "skip"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    rejects = (tmp_path / "ds.pkr" / "rejects.tsv").read_text()
    assert "a/1.jpg" in rejects and why in rejects, rejects
    ds = packrec.open(tmp_path / "ds.pkr")
    assert len(ds) == 1 and ds.sample(0)["json"] == {"ok": True}


def test_an_error_about_a_key_that_is_not_utf8_is_still_a_packrec_error(tmp_path):
    """A record whose key is not UTF-8, damaged on disk: ds[0] and ds.verify() report it as a
    packrec error, the key's bytes escaped, not a UnicodeDecodeError of the message."""
    tree = tmp_path / "tree"
    os.makedirs(tree / "a")
    name = os.fsencode(tree / "a") + b"/caf\xe9.jpg"
    Image.new("RGB", (32, 32), (9, 8, 7)).save(tmp_path / "x.jpg")
    shutil.copyfile(tmp_path / "x.jpg", name)
    run = subprocess.run([CLI, "convert", str(tree), str(tmp_path / "ds.pkr")], capture_output=True)
    assert run.returncode == 0, run.stderr
    shard = next((tmp_path / "ds.pkr").glob("shard-*.pkr"))
    data = bytearray(shard.read_bytes())
    data[data.index(b"\xff\xd8\xff") + 200] ^= 0xFF  # inside the only record's JPEG
    shard.write_bytes(bytes(data))
    ds = packrec.open(tmp_path / "ds.pkr")
    with pytest.raises(packrec.errors.CorruptionError) as raised:
        ds[0]
    assert raised.value.record_index == 0 and "caf\\xe9" in str(raised.value), raised.value
    report = ds.verify()
    assert not report["ok"] and report["problems"]
    assert all(isinstance(p["message"], str) for p in report["problems"])


@pytest.mark.parametrize("values, why", [
    ([0.5, 1e39], "beyond float32's range"),
    ([3, 18446744073709551615], "float32 cannot hold exactly"),
    ([0.25, 16777217], "float32 cannot hold exactly"),
])
def test_a_number_the_column_type_cannot_hold_is_a_named_reject(tmp_path, values, why):
    """metadata.jsonl numbers go to float32 or int64 columns; one the type cannot hold (it would
    become inf, or round) is that image's reject, never a changed value."""
    tree = tmp_path / "tree"
    os.makedirs(tree / "a")
    with open(tree / "metadata.jsonl", "w") as rows:
        for i, value in enumerate(values):
            Image.new("RGB", (16, 16), (i, 2, 3)).save(tree / "a" / f"{i}.jpg")
            rows.write(json.dumps({"file_name": f"a/{i}.jpg", "score": value}) + "\n")
    run = subprocess.run([CLI, "convert", str(tree), str(tmp_path / "ds.pkr"), "--on-error", "skip"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    rejects = (tmp_path / "ds.pkr" / "rejects.tsv").read_text()
    assert "a/1.jpg" in rejects and why in rejects and "column 'score'" in rejects, rejects
    ds = packrec.open(tmp_path / "ds.pkr")
    assert len(ds) == 1 and ds.sample(0)["score"].tolist() == [values[0]]
    failed = subprocess.run([CLI, "convert", str(tree), str(tmp_path / "fail.pkr")],
                            capture_output=True, text=True)
    assert failed.returncode != 0 and why in failed.stderr, failed.stderr
