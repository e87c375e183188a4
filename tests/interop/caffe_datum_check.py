#!/usr/bin/env python3
"""Reads packrec's Caffe Datum LMDB the way Caffe and DALI do, with Google's protobuf.

Usage: caffe_datum_check.py PACKREC_CLI WORK_DIR
Converts a synthetic tree with `--lmdb-values caffe-datum`, then iterates every entry of the
database with python-lmdb (as Caffe's DataLayer and DALI's fn.readers.caffe do: every entry is a
Datum) and parses it with protobuf (Debian python3-protobuf) against caffe.proto's Datum message,
declared below field for field. Every Datum must be encoded, carry the original file's bytes and
its label, in listing order. Exit 77 (skipped) without python-lmdb or protobuf.
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import lmdb
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
except ImportError as missing:
    print(f"skipped: {missing}")
    sys.exit(77)


def caffe_datum_class():
    """caffe.proto's `message Datum`, built at run time (no protoc, no Caffe in Debian 12)."""
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="caffe_datum.proto", package="caffe",
                                               syntax="proto2")
    message = proto.message_type.add(name="Datum")
    for name, number, kind, label in [
            ("channels", 1, field.TYPE_INT32, field.LABEL_OPTIONAL),
            ("height", 2, field.TYPE_INT32, field.LABEL_OPTIONAL),
            ("width", 3, field.TYPE_INT32, field.LABEL_OPTIONAL),
            ("data", 4, field.TYPE_BYTES, field.LABEL_OPTIONAL),
            ("label", 5, field.TYPE_INT32, field.LABEL_OPTIONAL),
            ("float_data", 6, field.TYPE_FLOAT, field.LABEL_REPEATED),
            ("encoded", 7, field.TYPE_BOOL, field.LABEL_OPTIONAL)]:
        message.field.add(name=name, number=number, type=kind, label=label)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    descriptor = pool.FindMessageTypeByName("caffe.Datum")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


Datum = caffe_datum_class()
cli, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
tree, dataset = os.path.join(work, "tree"), os.path.join(work, "caffe-lmdb")
subprocess.run([cli, "synth", tree, "--classes", "3", "--per-class", "15", "--seed", "7"],
               check=True, stdout=subprocess.DEVNULL)
subprocess.run([cli, "convert", "-q", tree, dataset, "--format", "lmdb", "--lmdb-values",
                "caffe-datum", "--commit-records", "7"], check=True, stdout=subprocess.DEVNULL)

classes = sorted(d for d in os.listdir(tree) if os.path.isdir(os.path.join(tree, d)))
listing = [os.path.join(c, f) for c in classes for f in sorted(os.listdir(os.path.join(tree, c)))]
with open(os.path.join(dataset, "packrec-manifest.json")) as f:
    manifest = json.load(f)
assert manifest["format"] == "packrec-lmdb" and manifest["classes"] == classes, manifest
env = lmdb.open(dataset, readonly=True, lock=False, subdir=True)
seen = 0
with env.begin() as txn:
    for key, value in txn.cursor():  # every entry, as Caffe reads the database
        datum = Datum()
        datum.ParseFromString(bytes(value))
        assert datum.encoded, key
        path = listing[seen]
        with open(os.path.join(tree, path), "rb") as original:
            assert datum.data == original.read(), path
        assert datum.label == classes.index(path.split("/")[0]), (path, datum.label)
        seen += 1
assert seen == manifest["record_count"] == 45, (seen, manifest["record_count"])
print(f"protobuf parsed {seen} caffe.Datum values: encoded, bytes and labels identical")
