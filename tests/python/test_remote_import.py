"""Import sources at URLs: WebDataset tars (written here by Python's tarfile, following the
WebDataset convention) and TFRecord files, served by nginx and by s3rver, converted with brace
ranges and S3 globs. The result must equal the conversion of the same files from local disk,
record for record; resets and 503s on the way are retried; a missing file is named."""
import io
import json
import os
import subprocess
import tarfile

import pytest

import packrec
import remote_servers
from remote_servers import FaultProxy

BUCKET = "src"
CLI = os.environ.get("PACKREC_CLI", "packrec")


def cli(*args, check=True):
    run = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300)
    if check:
        assert run.returncode == 0, run.stderr
    return run


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """www/wds/part-0000{0..3}.tar (Python's tarfile: NNNN.jpg + NNNN.cls per sample) and
    www/tfr/*.tfrecord (a packrec export), plus a stray www/wds/notes.txt a glob must skip."""
    root = tmp_path_factory.mktemp("import-src")
    tree = root / "tree"
    cli("synth", tree, "--classes", "2", "--per-class", "24", "--seed", "3")
    images = sorted(path for path in tree.rglob("*") if path.is_file())
    assert len(images) == 48
    www = root / "www"
    (www / "wds").mkdir(parents=True)
    for part in range(4):
        with tarfile.open(www / "wds" / f"part-{part:05d}.tar", "w", format=tarfile.USTAR_FORMAT) as tar:
            for i, image in enumerate(images[part * 12:(part + 1) * 12]):
                key = f"{part:02d}{i:04d}"
                for suffix, data in (("jpg", image.read_bytes()),
                                     ("cls", str(int("1" in image.parent.name[-1:])).encode())):
                    info = tarfile.TarInfo(f"{key}.{suffix}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    (www / "wds" / "notes.txt").write_text("not a tar")
    cli("convert", tree, www / "tfr", "--format", "tfrecord", "--shard-size", "256KiB")
    return www


@pytest.fixture(scope="module")
def servers(files, tmp_path_factory):
    work = tmp_path_factory.mktemp("import-servers")
    try:
        nginx = remote_servers.Nginx(files, work / "nginx")
        s3 = remote_servers.S3rver(work / "s3", BUCKET)
    except remote_servers.Unavailable as why:
        pytest.skip(str(why))
    remote_servers.upload_tree(s3.url, BUCKET, "wds", files / "wds")
    remote_servers.upload_tree(s3.url, BUCKET, "tfr", files / "tfr")
    http = FaultProxy(nginx.url)
    proxy = FaultProxy(s3.url)
    proxy.sigv4_secrets = {remote_servers.ACCESS_KEY: remote_servers.SECRET_KEY}
    saved = dict(os.environ)
    os.environ.update(remote_servers.s3_environment(proxy.url))
    yield http, proxy
    os.environ.clear()
    os.environ.update(saved)
    assert proxy.signature_failures == [], proxy.signature_failures
    for server in (http, proxy, nginx, s3):
        server.stop()


def records(path):
    return [(bytes(image), label, key) for image, label, key in packrec.open(path)]


def test_wds_tars_over_http_with_braces_match_the_local_conversion(files, servers, tmp_path):
    http, _ = servers
    http.reset_share, http.error_share = 0.1, 0.1  # retried: the result is the same
    http.reset_counts()
    try:
        cli("convert", f"{http.url}/wds/part-{{00000..00003}}.tar", tmp_path / "url.pkr")
    finally:
        http.reset_share, http.error_share = 0.0, 0.0
    assert http.faults > 0  # the proxy's draws are seeded: the same requests fail each run
    cli("convert", f"{files}/wds/part-{{00000..00003}}.tar", tmp_path / "local.pkr")
    got = records(tmp_path / "url.pkr")
    assert len(got) == 48
    assert got == records(tmp_path / "local.pkr")
    info = json.loads(cli("info", "--json", tmp_path / "url.pkr").stdout)
    assert info["source_kind"] == "wds"


def test_an_s3_glob_picks_the_matching_objects_in_order(files, servers, tmp_path):
    cli("convert", f"s3://{BUCKET}/wds/part-*.tar", tmp_path / "glob.pkr")
    cli("convert", f"{files}/wds/part-*.tar", tmp_path / "local.pkr")
    assert records(tmp_path / "glob.pkr") == records(tmp_path / "local.pkr")
    cli("convert", f"s3://{BUCKET}/tfr/*.tfrecord", tmp_path / "tfr.pkr")
    cli("convert", files / "tfr", tmp_path / "tfr-local.pkr")
    assert [r[:2] for r in records(tmp_path / "tfr.pkr")] == \
        [r[:2] for r in records(tmp_path / "tfr-local.pkr")]
    none = cli("convert", f"s3://{BUCKET}/wds/nothing-*.tar", tmp_path / "none.pkr", check=False)
    assert none.returncode == 3 and f"no object matches s3://{BUCKET}/wds/nothing-*.tar" in \
        none.stderr, none.stderr


def test_s3_downloads_are_checked_against_their_etag_and_fetched_again(files, servers, tmp_path):
    """A byte flipped on the way (a tar has no checksum of its own): S3's ETag of a single-part
    upload is the MD5 of the bytes, so the damaged copy is fetched again; never wrong bytes."""
    _, proxy = servers
    proxy.flip_share = 0.25
    proxy.reset_counts()
    try:
        run = cli("convert", f"s3://{BUCKET}/wds/part-*.tar", tmp_path / "flip.pkr", check=False)
    finally:
        proxy.flip_share = 0.0
    assert proxy.faults > 0
    cli("convert", f"{files}/wds/part-*.tar", tmp_path / "local.pkr")
    if run.returncode == 0:
        assert records(tmp_path / "flip.pkr") == records(tmp_path / "local.pkr")
    else:  # the same part damaged three times running: named, nothing published
        assert "damaged on the way" in run.stderr, run.stderr
        assert not (tmp_path / "flip.pkr" / "manifest.json").exists()


def test_a_missing_file_is_named_and_skip_keeps_the_rest(servers, tmp_path):
    http, _ = servers
    spec = f"{http.url}/wds/part-{{00000..00004}}.tar"  # part-00004 is not there
    failed = cli("convert", spec, tmp_path / "fail.pkr", check=False)
    assert failed.returncode != 0
    assert f"{http.url}/wds/part-00004.tar" in failed.stderr and "no such object" in \
        failed.stderr, failed.stderr
    assert not (tmp_path / "fail.pkr").exists()
    cli("convert", spec, tmp_path / "skip.pkr", "--on-error", "skip")
    assert len(packrec.open(tmp_path / "skip.pkr")) == 48


def test_http_globs_are_refused_with_the_reason(servers, tmp_path):
    http, _ = servers
    run = cli("convert", f"{http.url}/wds/*.tar", tmp_path / "x.pkr", check=False)
    assert run.returncode == 7 and "plain HTTP has no listing" in run.stderr, run.stderr
