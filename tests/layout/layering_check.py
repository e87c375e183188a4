#!/usr/bin/env python3
"""Holds every #include in lib/, formats/, include/, tools/ and python/src/ to the layer rules of
HACKING.md ("Layers"), so that breaking one fails a test instead of waiting for a review:

- each layer includes only itself and the layers below it (core < storage, decode < formats <
  dataset < ingest < bench; pipeline sits on core, storage and decode);
- a format folder never includes another format, the registry or the converter;
- public headers (include/packrec/) include only public headers and the standard library;
- tools/ and python/src/ use only the public headers;
- each third-party library's headers are included in one place;
- no format's name is a string literal outside its folder and the registry (lib/dataset/): the
  layers above ask the registry what a format is.

Usage: layering_check.py REPO_ROOT. Prints every violation and exits 1 when there is one.
"""
import pathlib
import re
import sys

FORMATS = {"shard", "lmdb", "hdf5", "wds", "tfrecord", "recordio", "mds"}

# What each layer may include, besides itself. "formats" means any format folder.
ALLOWED = {
    "core": set(),
    "storage": {"core"},
    "decode": {"core"},
    "format": {"core", "storage", "decode"},  # and its own folder only
    "dataset": {"core", "storage", "decode", "formats"},
    "pipeline": {"core", "storage", "decode"},
    "ingest": {"core", "storage", "decode", "dataset"},
    "bench": {"core", "storage", "decode", "dataset", "ingest", "pipeline"},
    "public": {"public"},
    "tools": {"public"},
    "python": {"public"},
}

# The layer each public header belongs to (what it declares is defined there).
PUBLIC_LAYER = {
    "status.h": "core", "record.h": "core", "version.h": "core",
    "reader.h": "storage", "writer.h": "storage", "source.h": "storage", "format.h": "storage",
    "shard.h": "format",
    "image.h": "decode", "decode.h": "decode",
    "dataset_ops.h": "dataset",
    "ingest.h": "ingest", "convert.h": "ingest", "merge.h": "ingest", "synth.h": "ingest",
    "loader.h": "pipeline", "gpu.h": "pipeline",
    "bench.h": "bench", "storage_emulation.h": "bench",
    "packrec.h": "umbrella",
}
ORDER = ["core", "storage", "decode", "format", "pipeline", "dataset", "ingest", "bench"]

# Third-party headers (a regex on the include) and the one place (folder or file) allowed them.
THIRD_PARTY = [
    (r"^hdf5\.h$", ["formats/hdf5/"]),
    (r"^lmdb\.h$", ["formats/lmdb/"]),
    (r"^archive(_entry)?\.h$", ["formats/wds/"]),
    (r"^google/protobuf/", ["formats/tfrecord/", "formats/lmdb/"]),
    (r"\.pb\.h$", ["formats/tfrecord/", "formats/lmdb/"]),
    (r"^turbojpeg\.h$", ["lib/decode/jpeg_codec.cc"]),
    (r"^jpeglib\.h$", ["lib/decode/jpeg_region.cc"]),
    (r"^png\.h$", ["lib/decode/png_codec.cc"]),
    (r"^opencv2/", ["lib/decode/resize.cc"]),
    (r"^stb_image_resize", ["lib/decode/image.cc"]),
    (r"^stb_image\.h$", ["lib/decode/foreign_codecs.cc"]),
    (r"^gif_lib\.h$", ["lib/decode/foreign_codecs.cc"]),
    (r"^tiffio\.h$", ["lib/decode/foreign_codecs.cc"]),
    (r"^webp/decode\.h$", ["lib/decode/webp_codec.cc"]),
    (r"^webp/demux\.h$", ["lib/decode/webp_codec.cc"]),
    (r"^zstd\.h$", ["lib/storage/payload.cc"]),
    (r"^simdjson\.h$", ["lib/storage/json_check.cc"]),
    (r"^curl/", ["lib/storage/object_store.cc"]),
    (r"^openssl/", ["lib/storage/object_store.cc"]),
    (r"^xxhash\.h$", ["lib/core/checksum.cc"]),
    (r"^isa-l/", ["lib/core/crc32c.cc"]),
    (r"^liburing\.h$", ["lib/bench/uring.cc"]),
    (r"^cuda", ["lib/pipeline/cuda_runtime.cu"]),
    (r"^CLI/", ["tools/"]),
    (r"^pybind11/", ["python/src/"]),
]


def layer_of_source(rel):
    parts = rel.split("/")
    if parts[0] == "lib":
        return parts[1], None
    if parts[0] == "formats":
        return "format", parts[1]
    if parts[0] == "include":
        return "public", None
    if parts[0] == "tools":
        return "tools", None
    if parts[0] == "python":
        return "python", None
    return None, None


def layer_of_include(target):
    """(layer, format folder) of a quoted include, or (None, None) when it is not ours."""
    first, _, rest = target.partition("/")
    if first == "packrec":
        return "public:" + PUBLIC_LAYER.get(rest, "unknown"), None
    if first in FORMATS:
        return "format", first
    if first in ALLOWED:
        return first, None
    return None, None


def our_include(root, path, target):
    """A relative include ("../ingest/x.h", "./x.h") as the layer-rooted name it stands for
    ("ingest/x.h"), so that it is held to the same rules; any other include as it is."""
    if not (target.startswith("../") or target.startswith("./")):
        return target
    resolved = (path.parent / target).resolve()
    try:
        rel = resolved.relative_to(root.resolve()).as_posix()
    except ValueError:
        return target
    for prefix, name in (("lib/", ""), ("formats/", ""), ("include/", "")):
        if rel.startswith(prefix):
            return name + rel[len(prefix):]
    return target


FORMAT_NAME_LITERAL = re.compile(
    r'"(' + "|".join(sorted(FORMATS | {"caffe-lmdb"})) + r')"')


def code_of(line):
    """`line` without its // comment: a // inside a string literal ("http://...") is code."""
    quote = None
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif line.startswith("//", i):
            return line[:i]
        i += 1
    return line


def check_format_names(rel, layer, text, problems):
    """A format named in a string literal outside formats/ and lib/dataset/ (comments aside)."""
    if layer in ("format", "dataset"):
        return
    for number, line in enumerate(text.splitlines(), 1):
        code = code_of(line)
        match = FORMAT_NAME_LITERAL.search(code)
        if match:
            problems.append(f"{rel}:{number}: {line.strip()}: the format name {match.group(0)} "
                            "outside its folder and the registry (ask the registry instead)")


def check_file(root, path, problems):
    rel = path.relative_to(root).as_posix()
    layer, own_format = layer_of_source(rel)
    if layer is None:
        return
    text = path.read_text(errors="replace")
    check_format_names(rel, layer, text, problems)
    for number, line in enumerate(text.splitlines(), 1):
        match = re.match(r'\s*#\s*include\s*([<"])([^>"]+)[>"]', line)
        if not match:
            continue
        quoted, target = match.group(1) == '"', match.group(2)
        where = f"{rel}:{number}: {line.strip()}"
        target = our_include(root, path, target)
        # <ingest/x.h> is ours as much as "ingest/x.h": held to the same rules.
        if not quoted and layer_of_include(target)[0] is not None:
            quoted = True
        if not quoted or layer in ("tools", "python"):
            for pattern, places in THIRD_PARTY:
                if re.search(pattern, target) and not any(
                        rel == p or (p.endswith("/") and rel.startswith(p)) for p in places):
                    problems.append(f"{where}: {target} belongs in {' or '.join(places)} only")
            if layer == "public" and not quoted and ("." in target or "/" in target):
                problems.append(f"{where}: a public header includes a third-party header")
            if layer in ("tools", "python") and quoted:
                inc_layer, _ = layer_of_include(target)
                if inc_layer is not None and not inc_layer.startswith("public:"):
                    problems.append(f"{where}: {layer}/ uses the public headers only")
            continue
        inc_layer, inc_format = layer_of_include(target)
        if inc_layer is None:
            if layer == "public":
                problems.append(f"{where}: a public header includes a non-public header")
            continue
        if inc_layer.startswith("public:"):
            if layer == "public":
                continue
            public_layer = inc_layer.split(":", 1)[1]
            if public_layer in ("umbrella", "unknown"):
                problems.append(f"{where}: the library includes the public headers it needs, "
                                "not packrec.h")
                continue
            # A layer may include the public headers of its own layer and the ones below it.
            own = "format" if layer == "format" else layer
            allowed = ALLOWED.get(own, set()) | {own}
            if "formats" in allowed:
                allowed.add("format")
            if public_layer == "format" and layer == "format" and own_format != "shard":
                problems.append(f"{where}: only formats/shard implements packrec/shard.h")
            elif public_layer not in allowed:
                problems.append(f"{where}: {layer} may not use {public_layer}'s public header")
            continue
        if layer == "public":
            problems.append(f"{where}: a public header includes a library-internal header")
        elif layer == "format":
            if inc_layer == "format":
                if inc_format != own_format:
                    problems.append(f"{where}: formats/{own_format} includes formats/{inc_format}"
                                    " (formats never include each other)")
            elif inc_layer not in ALLOWED["format"]:
                problems.append(f"{where}: formats/{own_format} includes {inc_layer}/ "
                                "(formats sit on core, storage and decode only)")
        elif inc_layer == "format":
            if "formats" in ALLOWED.get(layer, set()):
                continue
            problems.append(f"{where}: lib/{layer} reaches into formats/{inc_format}")
        elif inc_layer != layer and inc_layer not in ALLOWED.get(layer, set()):
            problems.append(f"{where}: lib/{layer} includes lib/{inc_layer} "
                            f"(above it, or beside it)")


SELF_TEST = {
    # file: (contents, whether it breaks a rule)
    "lib/core/fine.cc": ('#include "core/file_io.h"\n#include "packrec/status.h"\n', False),
    "lib/core/up.cc": ('#include "storage/payload.h"\n', True),
    "lib/core/public_up.cc": ('#include "packrec/reader.h"\n', True),
    "lib/storage/kit.cc": ('#include "core/checksum.h"\n#include <zstd.h>\n', True),
    "formats/shard/own.cc": ('#include "shard/manifest.h"\n#include "storage/payload.h"\n', False),
    "formats/shard/other.cc": ('#include "lmdb/lmdb_format.h"\n', True),
    "formats/wds/converter.cc": ('#include "ingest/listing_hash.h"\n', True),
    "formats/mds/registry.cc": ('#include "dataset/something.h"\n', True),
    "formats/hdf5/h5.cc": ("#include <hdf5.h>\n", False),
    "formats/lmdb/h5.cc": ("#include <hdf5.h>\n", True),
    "lib/dataset/registry.cc": ('#include "shard/shard_format.h"\n', False),
    "lib/ingest/convert.cc": ('#include "hdf5/hdf5_format.h"\n', True),
    "include/packrec/x.h": ("#include <nlohmann/json.hpp>\n", True),
    "tools/packrec/cmd.cc": ('#include "core/file_io.h"\n', True),
    "lib/ingest/named.cc": ('bool h5 = format == "hdf5";\n', True),
    "lib/ingest/commented.cc": ('int x;  // as "hdf5" does\n', False),
    "formats/hdf5/own_name.cc": ('const char* name = "hdf5";\n', False),
    "tools/packrec/flag.cc": ('check(IsMember({"shard", "lmdb"}));\n', True),
    # The holes a review found (issue 56): angle brackets, relative paths, a format reaching the
    # registry through <...>, and a format name after a // inside a string.
    "lib/storage/angle.cc": ("#include <ingest/convert_internal.h>\n", True),
    "lib/storage/relative.cc": ('#include "../ingest/convert_internal.h"\n', True),
    "lib/storage/relative_fine.cc": ('#include "../core/file_io.h"\n', False),
    "formats/wds/registry_angle.cc": ("#include <dataset/registry.h>\n", True),
    "lib/ingest/after_url.cc": ('auto u = "http://x"; bool h5 = f == "hdf5";\n', True),
    "lib/ingest/url_only.cc": ('auto u = "http://x";  // not "hdf5"\n', False),
}


def self_test():
    """Writes a small tree where each file keeps or breaks one rule, and checks the verdicts."""
    import tempfile
    failures = 0
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch)
        for rel, (text, _) in SELF_TEST.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        for rel, (_, breaks) in SELF_TEST.items():
            problems = []
            check_file(root, root / rel, problems)
            if bool(problems) != breaks:
                failures += 1
                print(f"self-test: {rel} should {'' if breaks else 'not '}be a violation: "
                      f"{problems}")
    print(f"layering self-test: {len(SELF_TEST)} cases, {failures} wrong")
    return failures == 0


def main():
    if not self_test():
        return 1
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    problems = []
    files = 0
    for folder in ("lib", "formats", "include", "tools", "python/src"):
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in (".h", ".cc", ".cu") and path.is_file():
                files += 1
                check_file(root, path, problems)
    for problem in problems:
        print(problem)
    print(f"layering: {files} files checked, {len(problems)} violations")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
