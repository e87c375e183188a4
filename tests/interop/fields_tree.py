"""The image folder both field interop checks convert (lmdb_fields_check.py, h5py_fields_check.py),
and the documented decoding of one value; neither imports packrec."""
import json
import os
import struct


def make_tree(tree, image_module):
    """Two classes of four JPEGs, each with a .json side file, all but one with a .txt caption,
    and a metadata.jsonl giving boxes (N x 4) and labels. Returns {key: {field: value as the
    files hold it}}."""
    expected = {}
    rows = []
    for cls in ("a", "b"):
        os.makedirs(os.path.join(tree, cls))
        for i in range(4):
            stem = os.path.join(tree, cls, f"{i:03d}")
            image_module.new("RGB", (20 + i, 16), (60 * i, 10, 200)).save(stem + ".jpg", quality=85)
            fields = {"boxes": [[1.5 * j, 2.0, 10.0 + j, 12.25] for j in range(i)],
                      "labels": [j + 1 for j in range(i)]}
            if i != 2:
                caption = f"caption {cls}{i} \u00fc\n".encode()
                with open(stem + ".txt", "wb") as f:
                    f.write(caption)
                fields["txt"] = caption
            meta = json.dumps({"i": i, "cls": cls}, indent=1).encode()
            with open(stem + ".json", "wb") as f:
                f.write(meta)
            fields["json"] = meta
            rows.append({"file_name": f"{cls}/{i:03d}.jpg", "boxes": fields["boxes"], "labels": fields["labels"]})
            expected[f"{cls}/{i:03d}.jpg"] = fields
    with open(os.path.join(tree, "metadata.jsonl"), "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return expected


def decode(spec, data):
    """A stored value as make_tree's expectations hold it: numbers (little-endian) as lists, rows
    of the inner shape for boxes; text, JSON and bytes as bytes."""
    if spec["type"] == "float32[]":
        numbers = list(struct.unpack(f"<{len(data) // 4}f", data))
        width = spec["shape"][0]
        return [numbers[r:r + width] for r in range(0, len(numbers), width)]
    if spec["type"] == "int64[]":
        return list(struct.unpack(f"<{len(data) // 8}q", data))
    return data
