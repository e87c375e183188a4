"""Writing shard datasets to s3:// URLs: `packrec convert SRC s3://bucket/ds` against s3rver on
127.0.0.1, behind the proxy that checks every request's SigV4 signature and injects faults. What
lands in the bucket is read back by packrec and looked at with curl (an independent client): a
manifest, when there is one, names only whole shards; the dataset verifies and extracts byte for
byte like the same conversion on local disk."""
import json
import os
import random
import signal
import subprocess
import time

import pytest

import remote_servers
from remote_servers import FaultProxy

BUCKET = "out"
CLI = os.environ.get("PACKREC_CLI", "packrec")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """s3rver with bucket `out`, behind a SigV4-checking FaultProxy; the AWS_* variables point at
    it for the module, and PACKREC_STAGING_DIR at a folder of the test's."""
    work = tmp_path_factory.mktemp("s3w")
    try:
        server = remote_servers.S3rver(work, BUCKET)
    except remote_servers.Unavailable as why:
        pytest.skip(str(why))
    proxy = FaultProxy(server.url)
    proxy.sigv4_secrets = {remote_servers.ACCESS_KEY: remote_servers.SECRET_KEY}
    saved = dict(os.environ)
    os.environ.update(remote_servers.s3_environment(proxy.url))
    os.environ["PACKREC_STAGING_DIR"] = str(work / "staging")
    os.environ.pop("AWS_SESSION_TOKEN", None)
    yield proxy, server, work / "staging"
    os.environ.clear()
    os.environ.update(saved)
    assert proxy.signature_failures == [], proxy.signature_failures
    proxy.stop()
    server.stop()


@pytest.fixture
def proxy(s3):
    proxy = s3[0]
    proxy.delay_ms, proxy.reset_share, proxy.error_share, proxy.flip_share = 0, 0.0, 0.0, 0.0
    proxy.reset_counts()
    return proxy


def cli(*args, check=True, timeout=300):
    run = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if check:
        assert run.returncode == 0, run.stderr
    return run


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    path = tmp_path_factory.mktemp("write-src") / "tree"
    cli("synth", path, "--classes", "3", "--per-class", "40", "--seed", "7")
    return path


def published(server, key):
    """The manifest at s3://out/KEY as curl reads it, or None when there is none; every shard it
    names must be in the bucket, whole (its size and packrec's stored xxh64 as listed)."""
    status, _, body = remote_servers.s3_object(server.url, BUCKET, f"{key}/manifest.json")
    if status == 404:
        return None
    assert status == 200, body[:300]
    manifest = json.loads(body)
    for shard in manifest["shards"]:
        status, headers, _ = remote_servers.s3_object(server.url, BUCKET,
                                                      f"{key}/{shard['file']}", head=True)
        assert status == 200, f"the manifest names {shard['file']}, which is not in the bucket"
        assert int(headers["content-length"]) == shard["size_bytes"], shard
        assert headers.get("x-amz-meta-packrec-xxh64") == shard["xxh64"], shard
    return manifest


def assert_same_as_local(url, tree, tmp_path):
    local = tmp_path / "local.pkr"
    cli("convert", tree, local, "--shard-size", "256KiB")
    cli("verify", url)
    remote_servers.assert_extracts_equal(cli, url, local, tmp_path)


def test_convert_to_s3_uploads_a_dataset_that_reads_like_the_local_one(s3, proxy, tree, tmp_path):
    _, server, staging = s3
    run = cli("convert", tree, "s3://out/plain", "--shard-size", "256KiB", "--json")
    assert json.loads(run.stdout)["records"] == 120
    manifest = published(server, "plain")
    assert len(manifest["shards"]) > 3
    assert_same_as_local("s3://out/plain", tree, tmp_path)
    # Uploaded: the staging copy is gone.
    assert not staging.exists() or list(staging.iterdir()) == []


def test_a_dataset_at_the_url_is_kept_unless_overwrite(s3, proxy, tree, tmp_path):
    _, server, _ = s3
    cli("convert", tree, "s3://out/twice", "--shard-size", "256KiB")
    before = published(server, "twice")
    again = cli("convert", tree, "s3://out/twice", check=False)
    assert again.returncode == 4, again.stderr
    assert "s3://out/twice already holds a dataset" in again.stderr
    assert published(server, "twice") == before
    cli("convert", tree, "s3://out/twice", "--shard-size", "1MiB", "--overwrite")
    after = published(server, "twice")
    assert len(after["shards"]) < len(before["shards"])
    cli("verify", "s3://out/twice")


def test_large_shards_go_up_in_parts_and_survive_resets_and_503s(s3, proxy, tmp_path):
    _, server, _ = s3
    big = tmp_path / "big"
    # About 40 MB of noisy JPEGs: one shard, uploaded in three 16 MiB parts.
    cli("synth", big, "--classes", "1", "--per-class", "110", "--width", "1900", "--height", "1500")
    proxy.reset_share, proxy.error_share = 0.05, 0.05
    cli("convert", big, "s3://out/big", "--shard-size", "1GiB")
    proxy.reset_share, proxy.error_share = 0.0, 0.0
    paths = [path for path, _ in proxy.ranges]
    assert any(path.endswith("shard-000000.pkr?uploads=") for path in paths), paths
    assert any("partNumber=3&uploadId=" in path for path in paths), paths
    manifest = published(server, "big")
    assert manifest["shards"][0]["size_bytes"] > 32 << 20
    cli("verify", "s3://out/big")


def test_http_urls_and_other_formats_are_refused_as_outputs(s3, proxy, tree):
    run = cli("convert", tree, "http://127.0.0.1:9/ds", check=False)
    assert run.returncode == 7 and "s3:// URLs only" in run.stderr, run.stderr
    run = cli("convert", tree, "s3://out/x.lmdb", "--format", "lmdb", check=False)
    assert run.returncode == 7 and "its shard format and its exports" in run.stderr, run.stderr


def test_exports_go_to_s3_with_their_manifest_last(s3, proxy, tree, tmp_path):
    """A WebDataset export to S3: every tar, then packrec-export.json; GNU tar reads the tars
    as curl fetched them, and importing the URLs back gives the records of a local export."""
    _, server, staging = s3
    cli("convert", tree, "s3://out/wds", "--format", "wds", "--shard-size", "256KiB")
    status, _, body = remote_servers.s3_object(server.url, BUCKET, "wds/packrec-export.json")
    assert status == 200
    export = json.loads(body)
    names = [name for entry in export["files"] for name in entry["files"]]
    assert len(names) > 1 and all(name.endswith(".tar") for name in names)
    members = 0
    for name in names:
        status, _, tar_bytes = remote_servers.s3_object(server.url, BUCKET, f"wds/{name}")
        assert status == 200
        (tmp_path / name).write_bytes(tar_bytes)
        listing = subprocess.run(["tar", "-tf", tmp_path / name], capture_output=True,
                                 text=True, check=True).stdout.split()
        members += len(listing)
    assert members >= 2 * 120  # an image and its metadata per record
    cli("convert", "s3://out/wds/shard-*.tar", tmp_path / "back.pkr")
    cli("convert", tree, tmp_path / "local-wds", "--format", "wds", "--shard-size", "256KiB")
    cli("convert", tmp_path / "local-wds", tmp_path / "local-back.pkr")
    import packrec
    got = [(bytes(b), label) for b, label, _ in packrec.open(tmp_path / "back.pkr")]
    want = [(bytes(b), label) for b, label, _ in packrec.open(tmp_path / "local-back.pkr")]
    assert got == want
    assert not staging.exists() or list(staging.iterdir()) == []


def test_killed_uploads_never_publish_a_partial_dataset_and_resume_completes(
        s3, proxy, tree, tmp_path):
    """20 runs killed with SIGKILL at random moments (converting, uploading shards, publishing):
    after each, the bucket holds either no manifest or one naming whole shards only; a run with
    --resume then completes and the dataset verifies from the URL."""
    _, server, staging = s3
    proxy.delay_ms = 15  # uploads take long enough to be killed in the middle
    draw = random.Random(36)
    outcomes = []
    full = time.monotonic()
    cli("convert", tree, "s3://out/killed", "--shard-size", "256KiB")
    full = time.monotonic() - full
    for attempt in range(20):
        # Every other run starts again (the dataset there is deleted first); the others continue
        # the run killed before.
        how = "--overwrite" if attempt % 2 == 0 else "--resume"
        process = subprocess.Popen(
            [CLI, "convert", str(tree), "s3://out/killed", "--shard-size", "256KiB", how, "-q"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(draw.uniform(0.0, full))
        process.send_signal(signal.SIGKILL)
        process.wait()
        manifest = published(server, "killed")
        if manifest is not None:
            assert manifest["record_count"] == 120
        outcomes.append((process.returncode, manifest is not None))
        # Whatever the kill before left (shards without a journal from a kill inside
        # --overwrite's clean-up, a whole staged dataset, a published one still being removed),
        # a run that ended by itself succeeded: the URL's output never gets stuck.
        assert process.returncode in (0, -signal.SIGKILL), (attempt, how, process.stderr.read())
    print(f"a whole run: {full:.2f} s; (exit status, published) per killed run:", outcomes)
    proxy.delay_ms = 0
    run = cli("convert", tree, "s3://out/killed", "--shard-size", "256KiB", "--resume", "--json")
    assert json.loads(run.stdout)["records"] == 120
    assert published(server, "killed") is not None
    assert_same_as_local("s3://out/killed", tree, tmp_path)
    # Published: no staged copy is left behind.
    assert not staging.exists() or [p.name for p in staging.iterdir()
                                    if p.name.startswith("out_killed")] == []


def test_python_convert_writes_to_a_url_too(s3, proxy, tree):
    import packrec
    stats = packrec.convert(tree, "s3://out/from-python", shard_size="256KiB")
    assert stats["records_written"] == 120, stats
    assert published(s3[1], "from-python")["record_count"] == 120
    assert len(packrec.open("s3://out/from-python")) == 120


def test_a_refused_upload_names_the_object_keeps_the_staging_and_resume_finishes(
        s3, proxy, tree):
    _, server, staging = s3
    proxy.deny_methods = {"PUT", "POST"}  # reads pass, writes are refused (a read-only key)
    try:
        run = cli("convert", tree, "s3://out/denied", "--shard-size", "256KiB", check=False)
    finally:
        proxy.deny_methods = set()
    assert run.returncode == 6, run.stderr
    assert "PUT s3://out/denied/shard-" in run.stderr and "access denied" in run.stderr, run.stderr
    assert "resuming uploads only what s3://out/denied lacks" in run.stderr, run.stderr
    assert published(server, "denied") is None
    assert any((path / "manifest.json").exists() for path in staging.iterdir())  # kept whole
    done = cli("convert", tree, "s3://out/denied", "--shard-size", "256KiB", "--resume", "--json")
    assert json.loads(done.stdout)["records"] == 120
    assert published(server, "denied")["record_count"] == 120
    cli("verify", "s3://out/denied")


def test_merge_of_parts_in_s3_into_s3_and_to_local_disk(s3, proxy, tree, tmp_path):
    """Parts converted on two "nodes" and uploaded by curl to s3://out/parts/, merged from there
    into s3://out/merged and onto local disk: both equal the local merge record for record."""
    _, server, _ = s3
    local_parts = tmp_path / "parts"
    for part in range(2):
        cli("convert", tree, local_parts, "--part", f"{part}/2", "--shard-size", "256KiB")
    for part_dir in sorted(local_parts.iterdir()):
        remote_servers.upload_tree(server.url, BUCKET, f"parts/{part_dir.name}", part_dir)
    cli("merge", tmp_path / "local-merge.pkr", local_parts)
    cli("merge", "s3://out/merged", "s3://out/parts")
    assert published(server, "merged")["record_count"] == 120
    cli("merge", tmp_path / "from-s3.pkr", "s3://out/parts/")
    import packrec
    want = [tuple(r) for r in packrec.open(tmp_path / "local-merge.pkr")]
    assert [tuple(r) for r in packrec.open("s3://out/merged")] == want
    assert [tuple(r) for r in packrec.open(tmp_path / "from-s3.pkr")] == want
    # --remove-parts deletes the parts' objects once the merged dataset is whole.
    cli("merge", "s3://out/merged", "s3://out/parts", "--overwrite", "--remove-parts")
    for part_dir in local_parts.iterdir():
        status, _, _ = remote_servers.s3_object(server.url, BUCKET,
                                                f"parts/{part_dir.name}/manifest.json", head=True)
        assert status == 404
    cli("verify", "s3://out/merged")
