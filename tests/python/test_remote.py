"""Shard datasets read from URLs: served by Debian's nginx over HTTP and by an S3 server (s3rver,
behind a proxy that checks every request's SigV4 signature), both started here on 127.0.0.1.
What comes over the network must equal the local dataset byte for byte, batch for batch; faults
(resets, 503s, flipped bytes, a server that stops answering) must end in retries or in an error
that names the URL or the record, never in wrong data or a hang."""
import hashlib
import json
import os
import pathlib
import pickle
import struct
import subprocess
import sys
import threading
import time

import numpy
import pytest
import torch
import torch.utils.data

import packrec
from packrec import errors
from packrec.torch import Dataset

import remote_servers
from remote_servers import FaultProxy

BUCKET = "train"
CLI = os.environ.get("PACKREC_CLI", "packrec")


def started(make):
    try:
        return make()
    except remote_servers.Unavailable as why:
        pytest.skip(str(why))


@pytest.fixture(scope="module")
def field_dataset(tmp_path_factory):
    """A small dataset whose records carry fields (a caption and a JSON), so that field blocks
    travel too."""
    from PIL import Image
    root = tmp_path_factory.mktemp("remote-fields") / "tree"
    for cls in ("bird", "fish"):
        (root / cls).mkdir(parents=True)
        for i in range(6):
            Image.new("RGB", (20 + i, 18), (30 * i, 90, 140)).save(root / cls / f"{i:03d}.jpg")
            (root / cls / f"{i:03d}.txt").write_text(f"a {cls} number {i}")
            (root / cls / f"{i:03d}.json").write_text(json.dumps({"i": i, "cls": cls}))
    out = root.parent / "fields.pkr"
    packrec.convert(root, out, shard_size=1 << 20)
    return out


@pytest.fixture(scope="module")
def http(datasets, field_dataset, tmp_path_factory):
    """nginx serving the shard dataset as /ds.pkr and the field dataset as /fields.pkr."""
    www = tmp_path_factory.mktemp("www")
    os.symlink(datasets["shard"], www / "ds.pkr")
    os.symlink(field_dataset, www / "fields.pkr")
    server = started(lambda: remote_servers.Nginx(www, tmp_path_factory.mktemp("nginx")))
    proxy = FaultProxy(server.url)
    yield proxy
    proxy.stop()
    server.stop()


@pytest.fixture(scope="module")
def s3(datasets, field_dataset, tmp_path_factory):
    """s3rver with bucket `train` holding ds.pkr and fields.pkr, behind a SigV4-checking proxy;
    AWS_* variables point packrec at it for the module."""
    work = tmp_path_factory.mktemp("s3")
    server = started(lambda: remote_servers.S3rver(work, BUCKET))
    remote_servers.upload_tree(server.url, BUCKET, "ds.pkr", datasets["shard"])
    remote_servers.upload_tree(server.url, BUCKET, "fields.pkr", field_dataset)
    proxy = FaultProxy(server.url)
    proxy.sigv4_secrets = {remote_servers.ACCESS_KEY: remote_servers.SECRET_KEY}
    saved = dict(os.environ)
    os.environ.update(remote_servers.s3_environment(proxy.url))
    os.environ.pop("AWS_SESSION_TOKEN", None)
    yield proxy
    os.environ.clear()
    os.environ.update(saved)
    assert proxy.signature_failures == [], proxy.signature_failures
    proxy.stop()
    server.stop()


@pytest.fixture(params=["http", "s3"])
def remote(request):
    """(url of the shard dataset, url of the field dataset, the proxy in front of the server)."""
    proxy = request.getfixturevalue(request.param)
    proxy.delay_ms, proxy.reset_share, proxy.error_share, proxy.flip_share = 0, 0.0, 0.0, 0.0
    proxy.reset_counts()
    if request.param == "http":
        return f"{proxy.url}/ds.pkr", f"{proxy.url}/fields.pkr", proxy
    return f"s3://{BUCKET}/ds.pkr", f"s3://{BUCKET}/fields.pkr", proxy


def cli(*args, env=None, check=True):
    run = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True,
                         env={**os.environ, **(env or {})}, timeout=120)
    if check:
        assert run.returncode == 0, run.stderr
    return run


def assert_extracts_equal(dataset, local, tmp_path):
    remote_servers.assert_extracts_equal(cli, dataset, local, tmp_path)


def test_info_verify_and_extract_match_the_local_dataset(remote, datasets, tmp_path):
    url, _, proxy = remote
    local = json.loads(cli("info", "--json", datasets["shard"]).stdout)
    over = json.loads(cli("info", "--json", url).stdout)
    for key in ("records", "classes", "payload_bytes", "file_bytes", "listing_hash", "format"):
        assert over[key] == local[key], key
    assert "OK: checked 120 of 120 records" in cli("verify", url).stdout
    assert_extracts_equal(url, datasets["shard"], tmp_path)
    assert proxy.requests > 0


def test_records_and_fields_read_in_python_equal_the_local_ones(remote, field_dataset):
    _, fields_url, _ = remote
    local, over = packrec.open(field_dataset), packrec.open(fields_url)
    assert len(over) == len(local) == 12
    assert over.fields == local.fields
    for i in range(len(local)):
        assert over[i] == local[i]
        assert over.sample(i) == local.sample(i)
    assert over.field("txt") == local.field("txt")
    assert over.verify()["ok"]


def test_the_loader_yields_the_local_batches_in_the_same_order(remote, datasets):
    url, _, proxy = remote

    def batches(path, shuffle):
        loader = packrec.Loader(path, batch_size=16, threads=2, transform="train", seed=9,
                                size=48, shuffle=shuffle)
        loader.set_epoch(2)
        return [(images.clone(), labels.clone()) for images, labels in loader]

    for shuffle in (True, False):
        want = batches(datasets["shard"], shuffle)
        proxy.reset_counts()
        got = batches(url, shuffle)
        assert len(got) == len(want) == 8
        for (images, labels), (want_images, want_labels) in zip(got, want):
            assert torch.equal(images, want_images) and torch.equal(labels, want_labels)
        # Each batch's records are fetched together, sorted and coalesced: far fewer requests
        # than records. In order, a batch of neighbours is one request, or two where it spans
        # two shards (the open's manifest, headers and indexes are counted too).
        opening = 1 + 2 * len(packrec.open(datasets["shard"]).info()["files"])
        limit = opening + 2 * 8 if not shuffle else 120 // 2
        assert proxy.requests <= limit, (shuffle, proxy.requests, proxy.ranges)


def test_the_cpp_loader_writes_the_same_batches_from_a_url(remote, datasets, dump_tool, tmp_path):
    url, _, _ = remote
    for name, path in (("local", datasets["shard"]), ("remote", url)):
        subprocess.run([dump_tool, str(path), str(tmp_path / name), "16", "2", "train", "4", "1",
                        "64"], check=True, timeout=120)
    assert (tmp_path / "remote").read_bytes() == (tmp_path / "local").read_bytes()


def digest_items(items):
    return sorted((hashlib.sha1(image).hexdigest(), int(label)) for image, label in items)


def test_torch_dataloader_with_four_workers_reads_every_record_once(s3, datasets):
    def collate(items):
        return items

    def read_all(path):
        loader = torch.utils.data.DataLoader(Dataset(path, decode="bytes"), batch_size=10,
                                             shuffle=True, num_workers=4, collate_fn=collate)
        return digest_items(item for batch in loader for item in batch)

    assert read_all(f"s3://{BUCKET}/ds.pkr") == read_all(os.fspath(datasets["shard"]))


def test_resets_and_503s_on_a_tenth_of_the_requests_are_retried(remote, datasets):
    url, _, proxy = remote
    proxy.reset_share, proxy.error_share = 0.05, 0.05
    local = packrec.open(datasets["shard"])
    over = packrec.open(url)
    for i in range(len(local)):
        assert over[i] == local[i]
    assert cli("verify", url).returncode == 0
    assert proxy.faults >= 3, proxy.faults  # faults did happen, and were survived
    proxy.reset_share = proxy.error_share = 0.0


def test_a_flipped_byte_is_a_checksum_error_naming_the_record(remote):
    url, _, proxy = remote
    ds = packrec.open(url)
    key = ds[7][2]
    proxy.flip_share = 1.0
    try:
        with pytest.raises(errors.CorruptionError) as raised:
            ds[7]
    finally:
        proxy.flip_share = 0.0
    message = str(raised.value)
    assert "record 7" in message and key in message and "checksum mismatch" in message
    assert ds[7][2] == key  # the next read, unflipped, is fine


def test_a_server_that_stops_answering_is_a_timeout_naming_the_url(http, monkeypatch):
    proxy = FaultProxy(http.url.replace(f":{http.port}", f":{http.port}"))  # a proxy of its own
    monkeypatch.setenv("PACKREC_REMOTE_TIMEOUT", "1")
    monkeypatch.setenv("PACKREC_REMOTE_TRIES", "2")
    try:
        ds = packrec.open(f"{proxy.url}/ds.pkr")
        proxy.stall = True
        started_at = time.monotonic()
        with pytest.raises(errors.IOFailureError) as raised:
            ds[3]
        elapsed = time.monotonic() - started_at
        assert elapsed < 15, elapsed
        message = str(raised.value)
        assert f"{proxy.url}/ds.pkr/shard-" in message and "no answer within 1 s" in message
        assert "tried 2 times" in message
        run = cli("info", f"{proxy.url}/ds.pkr", check=False)
        assert run.returncode != 0 and "no answer within 1 s" in run.stderr
    finally:
        proxy.stop()


def test_a_url_without_a_dataset_is_not_found_naming_the_manifest(http, s3):
    with pytest.raises(errors.NotFoundError, match=r"no http://127\.0\.0\.1:\d+/nothing/manifest"):
        packrec.open(f"{http.url}/nothing")
    with pytest.raises(errors.NotFoundError, match="only shard datasets are read from URLs"):
        packrec.open(f"s3://{BUCKET}/nothing")


def test_a_wrong_secret_is_an_access_error(s3, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(errors.IOFailureError, match=r"access denied \(HTTP 403: SignatureDoesNotMatch\)"):
        packrec.open(f"s3://{BUCKET}/ds.pkr")
    s3.signature_failures.clear()  # this test's, on purpose


def test_credentials_and_region_from_an_aws_profile_with_a_session_token(s3, datasets, tmp_path,
                                                                         monkeypatch):
    aws = tmp_path / ".aws"
    aws.mkdir()
    (aws / "credentials").write_text(
        "[default]\naws_access_key_id = nobody\naws_secret_access_key = wrong\n\n"
        f"[train]\naws_access_key_id = {remote_servers.ACCESS_KEY}\n"
        f"aws_secret_access_key = {remote_servers.SECRET_KEY}\naws_session_token = tok/en+1=\n")
    (aws / "config").write_text(f"[profile train]\nregion = {remote_servers.REGION}\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_PROFILE", "train")
    s3.reset_counts()
    ds = packrec.open(f"s3://{BUCKET}/ds.pkr")
    assert ds[5] == packrec.open(datasets["shard"])[5]
    assert s3.requests > 0


# The cache (docs/remote.md, "The cache"): blocks of 64 KiB here, so that the small test shards
# have many.
BLOCK = 64 * 1024


def cache_env(monkeypatch, directory, size):
    monkeypatch.setenv("PACKREC_CACHE_DIR", str(directory))
    monkeypatch.setenv("PACKREC_CACHE_SIZE", str(size))
    monkeypatch.setenv("PACKREC_CACHE_BLOCK", str(BLOCK))


def block_requests(proxy, shard_sizes):
    """The (shard, first byte) of every request for a whole cache block."""
    blocks = []
    for path, header in proxy.ranges:
        if not header:
            continue
        first, last = (int(x) for x in header.removeprefix("bytes=").split("-"))
        size = shard_sizes.get(path.rsplit("/", 1)[-1])
        if size and first % BLOCK == 0 and last + 1 - first == min(BLOCK, size - first):
            blocks.append((path, first))
    return blocks


def check_cache_files(directory):
    """Every block file in the cache is whole and matches its own checksum, read by the layout
    docs/remote.md gives (32-byte header: b"PKRBLOCK", u64 length, u64 xxHash64 of the bytes, u64
    xxHash64 of the file name),
    independently of packrec. Returns the number of blocks."""
    import xxhash
    blocks = 0
    for path in pathlib.Path(directory).iterdir():
        if not path.name.endswith(".blk"):
            continue
        data = path.read_bytes()
        assert data[:8] == b"PKRBLOCK", path
        length, digest, name = struct.unpack_from("<QQQ", data, 8)
        assert len(data) == 32 + length, path
        assert xxhash.xxh64_intdigest(data[32:]) == digest, path
        assert xxhash.xxh64_intdigest(path.name.encode()) == name, path  # the block it is
        blocks += 1
    return blocks


def test_four_workers_through_one_cache_download_each_block_once(http, datasets, tmp_path,
                                                                 monkeypatch):
    cache_env(monkeypatch, tmp_path / "cache", "64MiB")
    url = f"{http.url}/ds.pkr"
    sizes = {f["file"]: f["size_bytes"] for f in packrec.open(datasets["shard"]).info()["files"]}

    def collate(items):
        return items

    def epoch():
        loader = torch.utils.data.DataLoader(Dataset(url, decode="bytes"), batch_size=8,
                                             shuffle=True, num_workers=4, collate_fn=collate)
        return digest_items(item for batch in loader for item in batch)

    want = digest_items((ds_image, label) for ds_image, label, _ in packrec.open(datasets["shard"]))
    http.reset_counts()
    assert epoch() == want
    first = block_requests(http, sizes)
    assert len(first) == len(set(first)), "a block was downloaded twice"
    assert len(first) >= sum(size // BLOCK for size in sizes.values()) - len(sizes)
    http.reset_counts()
    assert epoch() == want
    assert block_requests(http, sizes) == []  # the second epoch comes from the cache
    assert check_cache_files(tmp_path / "cache") == len(first)


def test_a_block_file_swapped_with_another_is_fetched_again_not_served(http, datasets, tmp_path,
                                                                      monkeypatch):
    """Two block files of the cache swapped (each a whole, valid block, of another place): the
    next reader finds them naming other blocks, fetches both again, and reads every record right."""
    cache_env(monkeypatch, tmp_path / "cache", "64MiB")
    url = f"{http.url}/ds.pkr"
    local = packrec.open(datasets["shard"])
    want = digest_items((image, label) for image, label, _ in local)
    assert digest_items((image, label) for image, label, _ in packrec.open(url)) == want
    blocks = sorted((tmp_path / "cache").glob("*.blk"))
    assert len(blocks) >= 2
    first, second = blocks[0], blocks[1]
    first_bytes, second_bytes = first.read_bytes(), second.read_bytes()
    first.write_bytes(second_bytes)
    second.write_bytes(first_bytes)
    http.reset_counts()
    again = packrec.open(url)
    assert digest_items((image, label) for image, label, _ in again) == want
    assert again.remote_stats()["cache_fills"] >= 2  # the two swapped ones, fetched again
    check_cache_files(tmp_path / "cache")


def test_open_takes_the_cache_as_keywords_and_pickles_it_for_workers(http, datasets, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setenv("PACKREC_CACHE_BLOCK", str(BLOCK))  # small blocks; no cache named here
    url = f"{http.url}/ds.pkr"
    with pytest.raises(errors.InvalidArgumentError, match="cache needs cache_size"):
        packrec.open(url, cache=tmp_path / "cache")
    with pytest.raises(errors.InvalidArgumentError, match="timeout"):
        packrec.open(url, timeout=-1)
    ds = packrec.open(url, cache=tmp_path / "cache", cache_size="64MiB", timeout=5)
    want = digest_items((image, label) for image, label, _ in packrec.open(datasets["shard"]))
    assert digest_items((image, label) for image, label, _ in ds) == want
    filled = check_cache_files(tmp_path / "cache")
    assert filled > 0
    # A DataLoader worker gets the dataset pickled: the copy reads through the same cache.
    http.reset_counts()
    copy = pickle.loads(pickle.dumps(ds))
    assert digest_items((image, label) for image, label, _ in copy) == want
    sizes = {f["file"]: f["size_bytes"] for f in packrec.open(datasets["shard"]).info()["files"]}
    assert block_requests(http, sizes) == []
    assert copy.remote_stats()["cache_hits"] > 0
    # The torch Dataset passes them on.
    torch_ds = Dataset(url, decode="bytes", cache=tmp_path / "cache", cache_size="64MiB")
    assert torch_ds[0][0] == packrec.open(datasets["shard"])[0][0]


def test_the_cache_never_holds_more_than_its_limit(http, datasets, tmp_path, monkeypatch):
    limit = 4 * BLOCK
    cache = tmp_path / "cache"
    cache_env(monkeypatch, cache, limit)
    seen = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            total = 0
            for path in list(cache.glob("*")):
                try:
                    if path.name != "lock":
                        total += path.stat().st_size
                except FileNotFoundError:
                    pass
            seen.append(total)
            time.sleep(0.001)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        over, local = packrec.open(f"{http.url}/ds.pkr"), packrec.open(datasets["shard"])
        for _ in range(2):
            for i in range(len(local)):
                assert over[i] == local[i]
    finally:
        stop.set()
        watcher.join()
    stats = over.remote_stats()
    assert stats["cache_evictions"] > 0 and stats["cache_hits"] > 0, stats
    assert max(seen) <= limit + BLOCK + 32, max(seen)  # over by one unit at the most
    check_cache_files(cache)


KILLED_READER = """
import os, sys, packrec
ds = packrec.open(sys.argv[1])
print("ready", flush=True)
while True:
    for i in range(len(ds)):
        ds[i]
"""


def test_kill_9_during_fills_never_leaves_a_block_that_is_served_damaged(http, datasets, tmp_path,
                                                                         monkeypatch):
    import random
    cache = tmp_path / "cache"
    cache_env(monkeypatch, cache, 12 * BLOCK)  # smaller than the dataset: fills never stop
    http.delay_ms = 15
    url = f"{http.url}/ds.pkr"
    local = packrec.open(datasets["shard"])
    seed = int(os.environ.get("PACKREC_KILL_SEED", random.randrange(1 << 30)))
    print(f"PACKREC_KILL_SEED={seed}")
    chooser = random.Random(seed)
    try:
        for _ in range(5):
            child = subprocess.Popen([sys.executable, "-c", KILLED_READER, url],
                                     stdout=subprocess.PIPE, text=True)
            assert child.stdout.readline().strip() == "ready"
            time.sleep(chooser.uniform(0.05, 1.0))
            child.kill()
            child.wait()
            check_cache_files(cache)
    finally:
        http.delay_ms = 0
    # Damage one kept block's bytes behind the cache's back: it is found, dropped and fetched
    # again, never served.
    damaged = next(p for p in cache.iterdir() if p.name.endswith(".blk"))
    data = bytearray(damaged.read_bytes())
    data[40] ^= 0xFF
    damaged.write_bytes(bytes(data))
    over = packrec.open(url)
    for i in range(len(local)):
        assert over[i] == local[i]
    check_cache_files(cache)


def test_convert_takes_a_url_as_its_source(remote, datasets, tmp_path):
    url, _, _ = remote
    cli("convert", url, tmp_path / "copy.lmdb")
    assert_extracts_equal(tmp_path / "copy.lmdb", datasets["shard"], tmp_path)


def test_a_batch_that_repeats_records_is_read_as_locally(remote, datasets):
    url, _, _ = remote
    indices = [i // 3 for i in range(90)]  # every record of the first 30 three times

    def batches(path):
        loader = packrec.Loader(path, batch_size=16, threads=2, transform="eval", size=32,
                                seed=5, indices=indices)
        return [(images.clone(), labels.clone()) for images, labels in loader]

    got, want = batches(url), batches(datasets["shard"])
    assert len(got) == len(want) == 6
    for (images, labels), (want_images, want_labels) in zip(got, want):
        assert torch.equal(images, want_images) and torch.equal(labels, want_labels)


def test_bench_measures_a_url_and_names_a_slow_network_the_bottleneck(http, tmp_path):
    """`packrec bench` of a URL: network rows (one request at a time, coalesced batches at
    random and in order) instead of page-cache rows; with 300 ms per request the network is the
    bottleneck and the advice names the cache. The JSON follows docs/bench.schema.json."""
    http.delay_ms = 300
    report_path = tmp_path / "bench.json"
    cli("bench", "--quick", "--repeats", "1", f"{http.url}/ds.pkr", "--json", report_path)
    http.delay_ms = 0
    report = json.loads(report_path.read_text())
    rows = {(row["engine"], row["order"]): row for row in report["access"]
            if row["cache"] == "network"}
    assert set(rows) == {("request", "random"), ("coalesced", "random"),
                         ("coalesced", "sequential")}
    assert rows[("request", "random")]["request_latency_ms"] >= 300
    batch = rows[("coalesced", "random")]
    assert 0 < batch["requests"] < batch["records"]  # coalesced: fewer requests than records
    assert report["machine"]["data_device_kind"] == "network"
    assert report["bottleneck"] == "network", report["findings"]
    assert any(item["knob"] == "cache" for item in report["advice"])
    assert any(line.startswith("network: one request takes") for line in report["findings"])
    try:
        import jsonschema
    except ImportError:
        return
    schema = json.loads((pathlib.Path(__file__).parents[2] / "docs" / "bench.schema.json")
                        .read_text())
    jsonschema.validate(report, schema)
