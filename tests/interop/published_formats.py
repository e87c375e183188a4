"""The container formats other tools write, from their published framing (not from packrec's
code): CRC-32C and TFRecord's mask, the protobuf wire format by hand (tf.Example, caffe.Datum),
TFRecord frames, dmlc RecordIO records and im2rec's image header, MDS samples and shards. Shared by
tests/interop/foreign_formats_check.py and tests/fuzz/make_import_seeds.py.
"""
import json
import struct

# --- CRC-32C (Castagnoli), bit by bit, and TFRecord's mask --------------------------------------
def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


# RFC 3720, appendix B.4, and the common check value.
assert crc32c(bytes(32)) == 0x8A9136AA
assert crc32c(b"\xff" * 32) == 0x62A8AB43
assert crc32c(bytes(range(32))) == 0x46DD794E
assert crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C
assert crc32c(b"123456789") == 0xE3069283


# --- protobuf wire format, by hand ----------------------------------------------------------------
def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, wire, payload):
    if wire == 0:
        return varint(number << 3) + varint(payload)
    return varint((number << 3) | 2) + varint(len(payload)) + payload


def read_varint(data, pos):
    shift = value = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def fields_of(data):
    """(number, wire, value) for each field; value is bytes for wire 2, int for wire 0."""
    pos, out = 0, []
    while pos < len(data):
        tag, pos = read_varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = read_varint(data, pos)
        elif wire == 2:
            size, pos = read_varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.append((number, wire, value))
    return out


def example(features):
    """tf.Example: features (1) { map<string, Feature> feature = 1 }; Feature: bytes_list (1),
    int64_list (3), each a repeated value = 1 (int64 packed)."""
    entries = b""
    for name, value in features.items():
        if isinstance(value, int):
            feature = field(3, 2, field(1, 2, varint(value)))  # Int64List, packed
        else:
            feature = field(1, 2, field(1, 2, value))  # BytesList
        entries += field(1, 2, field(1, 2, name.encode()) + field(2, 2, feature))
    return field(1, 2, entries)


def parse_example(data):
    features = {}
    for number, _, value in fields_of(data):
        assert number == 1
        for entry_number, _, entry in fields_of(value):
            assert entry_number == 1
            name = feature = None
            for n, _, v in fields_of(entry):
                if n == 1:
                    name = v.decode()
                elif n == 2:
                    feature = v
            (kind, _, inner), = fields_of(feature)
            values = [v for _, _, v in fields_of(inner)]
            if kind == 3:
                values = [read_varint(values[0], 0)[0]] if isinstance(values[0], bytes) else values
            features[name] = values[0]
    return features


def tfrecord_frames(records):
    out = b""
    for data in records:
        length = struct.pack("<Q", len(data))
        out += length + struct.pack("<I", masked_crc(length)) + data
        out += struct.pack("<I", masked_crc(data))
    return out


def read_tfrecord(path):
    with open(path, "rb") as f:
        blob = f.read()
    pos, records = 0, []
    while pos < len(blob):
        length_bytes = blob[pos:pos + 8]
        (length,), (length_crc,) = struct.unpack("<Q", length_bytes), struct.unpack_from(
            "<I", blob, pos + 8)
        assert length_crc == masked_crc(length_bytes), f"{path}: length CRC at {pos}"
        data = blob[pos + 12:pos + 12 + length]
        (data_crc,) = struct.unpack_from("<I", blob, pos + 12 + length)
        assert data_crc == masked_crc(data), f"{path}: data CRC at {pos}"
        records.append((pos, 16 + length, data))
        pos += 16 + length
    return records


# --- RecordIO (dmlc-core), im2rec's image records -------------------------------------------------
MAGIC = 0xCED7230A


def recordio_record(data):
    """dmlc RecordIOWriter::WriteRecord: split at 4-aligned magic, drop it, flags 1/2/3."""
    magic, out, start, parts = struct.pack("<I", MAGIC), b"", 0, 0
    for i in range(0, len(data) - len(data) % 4, 4):
        if data[i:i + 4] == magic:
            out += magic + struct.pack("<I", ((1 if parts == 0 else 2) << 29) | (i - start))
            out += data[start:i]
            start, parts = i + 4, parts + 1
    rest = data[start:]
    out += magic + struct.pack("<I", ((3 if parts else 0) << 29) | len(rest)) + rest
    return out + b"\0" * ((4 - len(rest) % 4) % 4)


def ir_pack(label, ident, image):
    return struct.pack("<IfQQ", 0, float(label), ident, 0) + image


def read_recordio(path):
    with open(path, "rb") as f:
        blob = f.read()
    pos, records = 0, []
    while pos < len(blob):
        start, data = pos, b""
        while True:
            magic, lrec = struct.unpack_from("<II", blob, pos)
            assert magic == MAGIC, f"{path}: bad magic at {pos}"
            flag, length = lrec >> 29, lrec & ((1 << 29) - 1)
            data += blob[pos + 8:pos + 8 + length]
            pos += 8 + length + (4 - length % 4) % 4
            if flag in (0, 3):
                break
            data += struct.pack("<I", MAGIC)
        flag, label, ident, _ = struct.unpack_from("<IfQQ", data)
        assert flag == 0
        records.append((start, ident, label, data[24:]))
    return records


# --- caffe.Datum (Caffe's caffe.proto), by hand --------------------------------------------------
def caffe_datum(label, data, encoded, channels=0, height=0, width=0):
    """channels (1), height (2), width (3) for raw pixels; data (4), label (5), encoded (7)."""
    out = b""
    if channels:
        out += field(1, 0, channels) + field(2, 0, height) + field(3, 0, width)
    out += field(4, 2, data) + field(5, 0, label)
    return out + (field(7, 0, 1) if encoded else b"")


# --- MDS (MosaicML Streaming): columns filename (str), image (jpeg), label (int) ------------------
def mds_sample(key, data, label):
    """Variable-size columns' lengths first, then the columns in order."""
    return struct.pack("<II", len(key), len(data)) + key + data + struct.pack("<q", label)


def mds_shard(samples):
    """Sample count, the samples' offsets (and the end), the shard's JSON config, the samples."""
    config = json.dumps({"format": "mds"}).encode()
    offsets, at = [], 4 + 4 * (len(samples) + 1) + len(config)
    for sample in samples:
        offsets.append(at)
        at += len(sample)
    offsets.append(at)
    return (struct.pack("<I", len(samples)) + struct.pack(f"<{len(offsets)}I", *offsets) + config +
            b"".join(samples))
