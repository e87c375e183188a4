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
            Image.new("L", (24 + i, 16), i).save(f"{stem}.mask.bin", format="PNG")
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
            for suffix in ("json", "mask.bin", "txt"):
                path = root / cls / f"{stem}.{suffix}"
                fields[suffix] = path.read_bytes() if path.exists() else None
            records.append((f"{cls}/{name}", label, fields))
    return records


def test_fields_read_through_packrec(side_file_tree, field_dataset):
    ds = packrec.open(field_dataset)
    assert [f["name"] for f in ds.fields] == ["json", "mask.bin", "txt"]
    assert [f["type"] for f in ds.fields] == ["json", "bytes", "text"]
    expected = expected_records(side_file_tree)
    assert ds.labels.dtype == numpy.int64
    assert ds.labels.tolist() == [label for _, label, _ in expected]
    captions = ds.field("txt")
    assert captions == [None if f["txt"] is None else f["txt"].decode("utf-8") for _, _, f in expected]
    assert [json.loads(text) for text in ds.field("json")] == [json.loads(f["json"]) for _, _, f in expected]
    assert ds.field("mask.bin") == [f["mask.bin"] for _, _, f in expected]
    for i, (key, label, fields) in enumerate(expected):
        sample = ds.sample(i)
        assert (sample["key"], sample["label"]) == (key, label)
        assert sample["json"] == json.loads(fields["json"])
        assert sample["mask.bin"] == fields["mask.bin"]
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


@pytest.fixture(scope="module")
def detection_tree(tmp_path_factory):
    """Hugging Face imagefolder's layout: images in class folders, metadata.jsonl at the root
    with file_name and any columns (boxes N x 4, labels, a caption, a score, a nested object)."""
    root = tmp_path_factory.mktemp("detection") / "tree"
    rows = []
    for cls in ("cars", "people"):
        os.makedirs(root / cls)
        for i in range(3):
            Image.new("RGB", (64, 48), (30 * i, 90, 160)).save(root / cls / f"{i}.jpg", quality=90)
            boxes = [[4.0 + j, 4.0, 30.5 + j, 40.0] for j in range(i + 1)]
            row = {"file_name": f"{cls}/{i}.jpg", "boxes": boxes, "labels": [1 + (j % 2) for j in range(i + 1)],
                   "caption": f"{i + 1} objects, {cls}", "score": 0.25 * i, "meta": {"source": cls, "ok": True}}
            if i == 1:
                del row["caption"]  # a record may lack a field
            rows.append(row)
    with open(root / "metadata.jsonl", "w") as f:
        for row in reversed(rows):  # any row order
            f.write(json.dumps(row) + "\n")
    return root


@pytest.fixture(scope="module")
def detection_dataset(detection_tree, tmp_path_factory):
    out = tmp_path_factory.mktemp("detection-ds") / "ds"
    packrec.convert(str(detection_tree), str(out))
    return out


def test_metadata_jsonl_columns_read_back_equal(detection_tree, detection_dataset):
    # An independent reader of the JSONL: each column's value, by file name.
    rows = {}
    with open(detection_tree / "metadata.jsonl") as f:
        for line in f:
            row = json.loads(line)
            rows[row.pop("file_name")] = row
    ds = packrec.open(detection_dataset)
    types = {f["name"]: (f["type"], f["shape"]) for f in ds.fields}
    assert types == {"boxes": ("float32[]", [4]), "caption": ("text", []), "labels": ("int64[]", []),
                     "meta": ("json", []), "score": ("float32[]", [])}
    assert len(ds) == len(rows)
    for i in range(len(ds)):
        sample = ds.sample(i)
        want = rows[sample["key"]]
        assert sample["boxes"].tolist() == want["boxes"]
        assert sample["labels"].tolist() == want["labels"]
        assert sample["caption"] == want.get("caption")
        assert sample["meta"] == want["meta"]
        assert sample["score"].tolist() == [want["score"]]  # a number is a one-element array


def test_metadata_rows_that_do_not_match_the_images_are_named_rejects(detection_tree, tmp_path):
    import shutil

    tree = tmp_path / "tree"
    shutil.copytree(detection_tree, tree)
    lines = (tree / "metadata.jsonl").read_text().splitlines()
    lines = [line for line in lines if '"cars/0.jpg"' not in line]           # an image with no row
    lines.append(json.dumps({"file_name": "cars/9.jpg", "labels": [1]}))     # a row with no image
    lines.append(next(line for line in lines if '"people/2.jpg"' in line))  # two rows for one image
    lines.append("{not json")
    (tree / "metadata.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(packrec.Error):
        packrec.convert(str(tree), str(tmp_path / "strict"))
    packrec.convert(str(tree), str(tmp_path / "ds"), on_error="skip")
    rejects = (tmp_path / "ds" / "rejects.tsv").read_text()
    assert "cars/0.jpg\tno row of metadata.jsonl names it" in rejects
    assert "its file_name 'cars/9.jpg' is no listed image" in rejects
    assert "both name it" in rejects and "people/2.jpg" in rejects
    assert f"metadata.jsonl:{len(lines)}\tnot a JSON object" in rejects
    assert len(packrec.open(tmp_path / "ds")) == 4


def torchvision_ops():
    import torchvision.ops
    return torchvision.ops


def test_torch_dataset_targets_feed_a_detection_training_step(detection_dataset):
    torch = pytest.importorskip("torch")
    detection = pytest.importorskip("torchvision.models.detection")
    import packrec.torch as packrec_torch

    dataset = packrec_torch.Dataset(detection_dataset, decode="tensor", target=("boxes", "labels"),
                                    transform=lambda image: image.float() / 255)
    assert dataset.classes == ["cars", "people"]
    assert dataset.class_to_idx == {"cars": 0, "people": 1}
    assert dataset.targets == [0, 0, 0, 1, 1, 1]
    assert [os.path.basename(path) for path, _ in dataset.samples] == ["0.jpg", "1.jpg", "2.jpg"] * 2
    image, target = dataset[2]
    assert image.shape == (3, 48, 64)
    assert target["boxes"].dtype == torch.float32 and target["boxes"].shape == (3, 4)
    assert target["labels"].dtype == torch.int64 and target["labels"].tolist() == [1, 2, 1]
    loader = torch.utils.data.DataLoader(dataset, batch_size=3, shuffle=True,
                                         collate_fn=lambda batch: tuple(zip(*batch)))
    torch.manual_seed(0)
    # torchvision's Faster R-CNN (transform, RPN, RoI heads, losses) over a one-layer backbone: the
    # targets go through the same detection API as with a real backbone, in seconds (a
    # MobileNetV3-FPN step took 115 s of CI's 2 cores with Debian's torch).
    backbone = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=4, padding=1), torch.nn.ReLU())
    backbone.out_channels = 8
    model = detection.FasterRCNN(
        backbone, num_classes=3, min_size=64, max_size=96,
        rpn_anchor_generator=detection.anchor_utils.AnchorGenerator(sizes=((16, 32),),
                                                                    aspect_ratios=((0.5, 1.0, 2.0),)),
        box_roi_pool=torchvision_ops().MultiScaleRoIAlign(featmap_names=["0"], output_size=4,
                                                          sampling_ratio=2))
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    images, targets = next(iter(loader))
    losses = model(list(images), list(targets))
    loss = sum(losses.values())
    assert torch.isfinite(loss)
    loss.backward()
    optimizer.step()
    # The other target forms.
    assert packrec_torch.Dataset(detection_dataset, target="caption", decode="bytes")[1][1] is None
    assert packrec_torch.Dataset(detection_dataset, target=lambda r: r["meta"]["source"], decode="bytes")[0][1] == "cars"
    with pytest.raises(ValueError, match="not a field"):
        packrec_torch.Dataset(detection_dataset, target="masks")


def test_metadata_csv_columns_typed_like_pandas(tmp_path):
    import csv

    root = tmp_path / "tree"
    os.makedirs(root / "a")
    rows = []
    for i in range(3):
        Image.new("RGB", (20, 20), (i, 0, 0)).save(root / "a" / f"{i}.jpg")
        rows.append({"file_name": f"a/{i}.jpg", "caption": f'say "hi", {i}\nsecond line', "count": str(i * 7),
                     "ratio": f"{i / 4}", "note": "" if i == 1 else f"n{i}"})
    with open(root / "metadata.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    packrec.convert(str(root), str(tmp_path / "ds"))
    ds = packrec.open(tmp_path / "ds")
    types = {f["name"]: f["type"] for f in ds.fields}
    assert types == {"caption": "text", "count": "int64[]", "ratio": "float32[]", "note": "text"}
    with open(root / "metadata.csv", newline="") as f:
        expected = list(csv.DictReader(f))  # the independent reader
    for i, want in enumerate(expected):
        sample = ds.sample(i)
        assert sample["key"] == want["file_name"]
        assert sample["caption"] == want["caption"]
        assert sample["count"].tolist() == [int(want["count"])]
        assert sample["ratio"].tolist() == [float(want["ratio"])]
        assert sample["note"] == (want["note"] or None)  # an empty cell: the field is absent


def test_loader_delivers_fields_with_each_batch(detection_dataset):
    ds = packrec.open(detection_dataset)
    loader = packrec.Loader(ds, batch_size=4, shuffle=False, threads=2, size=32, output="numpy",
                            fields=("boxes", "labels", "caption", "score"))
    seen = 0
    for images, labels, fields in loader:
        assert images.shape[1:] == (32, 32, 3)
        assert set(fields) == {"boxes", "labels", "caption", "score"}
        # score has one number per record: one array for the batch; boxes vary in count: a list.
        assert fields["score"].shape == (len(labels), 1)
        for i in range(len(labels)):
            sample = ds.sample(seen + i)
            assert fields["boxes"][i].tolist() == sample["boxes"].tolist()
            assert fields["labels"][i].tolist() == sample["labels"].tolist()
            assert fields["caption"][i] == sample["caption"]
            assert fields["score"][i].tolist() == sample["score"].tolist()
        seen += len(labels)
    assert seen == len(ds)
    with pytest.raises(packrec.Error, match="no field 'masks'"):
        packrec.Loader(ds, fields=("masks",))


def test_indexing_a_dataset_with_fields_gives_a_record_that_is_still_the_tuple(detection_dataset):
    import pickle

    ds = packrec.open(detection_dataset)
    record = ds[2]
    data, label, key = record  # as for a dataset without fields
    assert isinstance(record, tuple) and isinstance(record, packrec.Record)
    sample = ds.sample(2)
    assert (data, label, key) == (sample["image"], sample["label"], sample["key"])
    assert record.caption == record["caption"] == sample["caption"]
    assert record["boxes"].tolist() == sample["boxes"].tolist()
    assert record.key == key and record.label == label and record.image == data
    assert sorted(record.fields) == ["boxes", "caption", "labels", "meta", "score"]
    with pytest.raises(AttributeError, match="no field 'masks'"):
        record.masks
    copy = pickle.loads(pickle.dumps(record))
    assert copy == record and copy.caption == record.caption


def _write_tar(path, samples):
    import io
    import tarfile
    with tarfile.open(path, "w") as tar:
        for key, members in samples:
            for suffix, data in members.items():
                info = tarfile.TarInfo(f"{key}.{suffix}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def test_an_image_text_webdataset_delivers_captions_with_the_images(side_file_tree, tmp_path):
    samples = []
    for i, path in enumerate(sorted(side_file_tree.glob("*/*.jpg"))):
        samples.append((f"{i:09d}", {
            "jpg": path.read_bytes(), "txt": f"caption {i}".encode(),
            "json": json.dumps({"url": f"http://x/{i}", "key": f"{i:09d}"}).encode()}))
    _write_tar(tmp_path / "laion-000000.tar", samples)
    out = tmp_path / "laion.pkr"
    packrec.convert(tmp_path / "laion-000000.tar", out, drop_fields=["json"])
    ds = packrec.open(out)
    assert [f["name"] for f in ds.fields] == ["txt"]
    loader = packrec.Loader(ds, batch_size=4, shuffle=False, size=32, output="numpy",
                            fields=("txt",))
    captions = [c for _, _, fields in loader for c in fields["txt"]]
    assert captions == [f"caption {i}" for i in range(len(samples))]
    with pytest.raises(packrec.errors.InvalidArgumentError, match="fields"):
        packrec.convert(tmp_path / "laion-000000.tar", tmp_path / "bad.pkr", fields="txt")


def test_coco_annotations_read_back_with_the_jsons_boxes_and_ids(side_file_tree, tmp_path):
    images = tmp_path / "val2017"
    images.mkdir()
    coco = {"images": [], "annotations": [], "categories": [{"id": 3, "name": "car"}]}
    for i, path in enumerate(sorted(side_file_tree.glob("*/*.jpg"))[:4]):
        name = f"{i:012d}.jpg"
        (images / name).write_bytes(path.read_bytes())
        coco["images"].append({"id": i + 1, "file_name": name})
        for k in range(i):
            coco["annotations"].append({"id": 10 * i + k, "image_id": i + 1, "category_id": 3,
                                        "bbox": [1.5 * k, 2.25, 3.0, 4.125 + k], "area": 12.5,
                                        "iscrowd": 0, "segmentation": [[0, 0, 1, 1, 2, 0]]})
    (tmp_path / "instances.json").write_text(json.dumps(coco))
    out = tmp_path / "coco.pkr"
    packrec.convert(images, out, annotations=tmp_path / "instances.json")
    ds = packrec.open(out)
    for i in range(4):
        mine = [a for a in coco["annotations"] if a["image_id"] == i + 1]
        sample = ds.sample(i)
        assert sample["boxes"].shape == (len(mine), 4)
        assert sample["boxes"].tolist() == [[numpy.float32(v) for v in a["bbox"]] for a in mine]
        assert sample["category_id"].tolist() == [a["category_id"] for a in mine]
        assert sample["annotation_id"].tolist() == [a["id"] for a in mine]
        assert sample["segmentation"] == [a["segmentation"] for a in mine]
