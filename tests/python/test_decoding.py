"""packrec's decoded pixels against PIL's Image.open(...).convert("RGB") (torchvision's loader),
image mode by image mode (docs/decoding.md): equal, or different by the documented rule."""
import io
import os
import struct
import subprocess
import tarfile
import zlib

import numpy
import pytest
from PIL import Image

import packrec

RNG = numpy.random.default_rng(7)
RGB = RNG.integers(0, 256, (17, 23, 3), dtype=numpy.uint8)
ALPHA = RNG.integers(0, 256, (17, 23, 1), dtype=numpy.uint8)


def pil_png(image, **options):
    out = io.BytesIO()
    image.save(out, format="PNG", **options)
    return out.getvalue()


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def raw_png(samples, color_type, depth, extra_chunks=b""):
    """A PNG written by hand from the published layout (PIL cannot write 16-bit colour)."""
    height, width = samples.shape[:2]
    dtype = ">u2" if depth == 16 else "u1"
    raw = b"".join(b"\x00" + samples[y].astype(dtype).tobytes() for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + extra_chunks +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def pil_rgb(data):
    return numpy.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def ours_rgb(data):
    pixels = packrec.decode(data)
    return numpy.repeat(pixels, 3, axis=2) if pixels.shape[2] == 1 else pixels


def palette_image(transparency):
    image = Image.fromarray(RGB).convert("P", palette=Image.ADAPTIVE, colors=16)
    return pil_png(image, **({"transparency": 3} if transparency else {}))


COLOR16 = RNG.integers(0, 65536, (17, 23, 3), dtype=numpy.uint16)
ALPHA16 = RNG.integers(0, 65536, (17, 23, 1), dtype=numpy.uint16)
CASES = {
    "RGB": lambda: pil_png(Image.fromarray(RGB, "RGB")),
    "RGBA": lambda: pil_png(Image.fromarray(numpy.concatenate([RGB, ALPHA], 2), "RGBA")),
    "L": lambda: pil_png(Image.fromarray(RGB[..., 0], "L")),
    "LA": lambda: pil_png(Image.fromarray(numpy.concatenate([RGB[..., :1], ALPHA], 2), "LA")),
    "P": lambda: palette_image(False),
    "P with tRNS": lambda: palette_image(True),
    "1-bit": lambda: pil_png(Image.fromarray(RGB[..., 0] > 127)),
    "RGB with tRNS": lambda: raw_png(RGB, 2, 8, chunk(b"tRNS", struct.pack(">HHH", 1, 2, 3))),
    "RGB with gAMA 1.0": lambda: raw_png(RGB, 2, 8, chunk(b"gAMA", struct.pack(">I", 100000))),
    "RGB 16-bit": lambda: raw_png(COLOR16, 2, 16),
    "RGBA 16-bit": lambda: raw_png(numpy.concatenate([COLOR16, ALPHA16], 2), 6, 16),
    "LA 16-bit": lambda: raw_png(numpy.concatenate([COLOR16[..., :1], ALPHA16], 2), 4, 16),
}


@pytest.mark.parametrize("mode", sorted(CASES))
def test_png_pixels_equal_pils_convert_rgb(mode):
    data = CASES[mode]()
    assert numpy.array_equal(ours_rgb(data), pil_rgb(data)), mode


def test_16_bit_gray_keeps_the_high_byte_where_pil_clips():
    gray = RNG.integers(0, 65536, (17, 23), dtype=numpy.uint16)
    data = raw_png(gray, 0, 16)
    ours = ours_rgb(data)
    assert numpy.array_equal(ours[..., 0], (gray >> 8).astype(numpy.uint8))
    # PIL's rule, which packrec documents and does not follow: I;16 -> RGB clips at 255.
    assert numpy.array_equal(pil_rgb(data)[..., 0], numpy.minimum(gray, 255).astype(numpy.uint8))


def test_the_loader_decodes_pngs_by_the_same_rules(tmp_path):
    # An RGBA PNG, converted (stored as it is) and read by the eval loader at its own scale (the
    # shorter side 17 stays 17, a centre crop of 17 x 17): PIL's pixels, cropped.
    rgba = numpy.concatenate([RGB, ALPHA], 2)
    for name in ("a", "b"):
        (tmp_path / "tree" / name).mkdir(parents=True)
        Image.fromarray(rgba, "RGBA").save(tmp_path / "tree" / name / "x.png")
    packrec.convert(tmp_path / "tree", tmp_path / "ds.pkr")
    stored = packrec.open(tmp_path / "ds.pkr")[0][0]
    assert stored == (tmp_path / "tree" / "a" / "x.png").read_bytes()
    loader = packrec.Loader(tmp_path / "ds.pkr", batch_size=2, shuffle=False, transform="eval",
                            size=17, resize=17, output="numpy", threads=1)
    images, _ = next(iter(loader))
    assert numpy.array_equal(images[0], pil_rgb(stored)[:, 3:20])


def test_bmp_tiff_ppm_pgm_gif_are_transcoded_losslessly_to_pils_pixels(tmp_path):
    """ImageFolder's other extensions (and GIF, through a list file) convert: each stored as a
    PNG of exactly PIL's convert("RGB") pixels, its key ending in .png (what extract writes)."""
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "b").mkdir()
    palette = Image.fromarray(RGB).convert("P", palette=Image.ADAPTIVE, colors=32)
    sources = {
        "a/rgb.bmp": lambda p: Image.fromarray(RGB).save(p),
        "a/palette.bmp": lambda p: palette.save(p),
        "a/rgb.tif": lambda p: Image.fromarray(RGB).save(p),
        "a/lzw.tiff": lambda p: Image.fromarray(RGB).save(p, compression="tiff_lzw"),
        "a/gray.tif": lambda p: Image.fromarray(RGB[..., 0]).save(p),
        "b/rgba.tif": lambda p: Image.fromarray(numpy.concatenate([RGB, ALPHA], 2), "RGBA").save(p),
        "b/rgb.ppm": lambda p: Image.fromarray(RGB).save(p),
        "b/gray.pgm": lambda p: Image.fromarray(RGB[..., 0]).save(p),
    }
    for key, write in sources.items():
        write(tree / key)
    stats = packrec.convert(tree, tmp_path / "ds.pkr")
    assert stats["records_written"] == len(sources) and stats["rejects"] == []
    ds = packrec.open(tmp_path / "ds.pkr")
    stored = {key: data for data, _, key in ds}
    for key in sources:
        png_key = key.rsplit(".", 1)[0] + ".png"
        assert stored[png_key][:8] == b"\x89PNG\r\n\x1a\n", key
        assert numpy.array_equal(ours_rgb(stored[png_key]), pil_rgb((tree / key).read_bytes())), key
    # GIF is not among ImageFolder's extensions; a list file names it. The first frame, as PIL.
    palette.save(tmp_path / "frame.gif", interlace=True)
    (tmp_path / "list.txt").write_text("frame.gif 3\n")
    packrec.convert(tmp_path / "list.txt", tmp_path / "gif.pkr", root=tmp_path)
    data, label, key = packrec.open(tmp_path / "gif.pkr")[0]
    assert (label, key) == (3, "frame.png")
    assert numpy.array_equal(ours_rgb(data), pil_rgb((tmp_path / "frame.gif").read_bytes()))
    # With --quality they become JPEGs (keys .jpg); extract writes what each key says.
    packrec.convert(tree, tmp_path / "q.pkr", quality=90)
    assert all(data[:2] == b"\xff\xd8" and key.endswith(".jpg") for data, _, key in packrec.open(tmp_path / "q.pkr"))


def test_formats_packrec_cannot_read_are_refused_by_name(tmp_path):
    (tmp_path / "tree" / "a").mkdir(parents=True)
    Image.fromarray(RGB).save(tmp_path / "tree" / "a" / "ok.png")
    (tmp_path / "tree" / "a" / "ascii.ppm").write_bytes(b"P3\n1 1\n255\n1 2 3\n")
    whole = webp(RGB, lossless=True)
    (tmp_path / "tree" / "a" / "cut.webp").write_bytes(whole[:-40])
    with pytest.raises(packrec.errors.InvalidInputError, match="P3 .ASCII or 1-bit. is not read"):
        packrec.convert(tmp_path / "tree", tmp_path / "x.pkr")
    stats = packrec.convert(tmp_path / "tree", tmp_path / "x.pkr", on_error="skip")
    assert stats["records_written"] == 1 and len(stats["rejects"]) == 2
    rejects = (tmp_path / "x.pkr" / "rejects.tsv").read_text()
    assert f"truncated WebP: its RIFF header declares {len(whole)} bytes" in rejects
    assert "P3" in rejects


def cli(arguments):
    if "PACKREC_CLI" not in os.environ:
        pytest.skip("PACKREC_CLI is not set (run through ctest)")
    subprocess.run([os.environ["PACKREC_CLI"], *map(str, arguments)], check=True,
                   stdout=subprocess.DEVNULL)


def webp(pixels, **options):
    out = io.BytesIO()
    mode = "RGBA" if pixels.shape[2] == 4 else "RGB"
    Image.fromarray(pixels, mode).save(out, format="WEBP", **options)
    return out.getvalue()


RGBA = numpy.concatenate([RGB, ALPHA], 2)
WEBP_CASES = {
    "lossy": lambda: webp(RGB, quality=80),
    "lossless": lambda: webp(RGB, lossless=True),
    "lossy with alpha": lambda: webp(RGBA, quality=80),
    "lossless with alpha": lambda: webp(RGBA, lossless=True, exact=True),
}


@pytest.mark.parametrize("kind", sorted(WEBP_CASES))
def test_webp_pixels_equal_pils_convert_rgb(kind):
    data = WEBP_CASES[kind]()
    info = packrec.image_info(data)
    assert (info["encoding"], info["width"], info["height"]) == ("webp", 23, 17)
    assert info["channels"] == (4 if "alpha" in kind else 3)
    assert numpy.array_equal(ours_rgb(data), pil_rgb(data)), kind


def test_webp_is_stored_as_webp_in_every_format_and_decoded_like_pil(tmp_path):
    """WebP files convert byte for byte (keys keep .webp) into shards, LMDB and HDF5, whose
    manifests then carry the version that tells older readers to refuse them; the loader, verify
    --deep and extract read them. A dataset without WebP keeps the version it had before."""
    tree = tmp_path / "tree"
    sources = {"a/lossy.webp": WEBP_CASES["lossy"](), "a/alpha.webp": WEBP_CASES["lossless with alpha"](),
               "b/plain.webp": WEBP_CASES["lossless"](), "b/other.png": pil_png(Image.fromarray(RGB))}
    for key, data in sources.items():
        (tree / key).parent.mkdir(parents=True, exist_ok=True)
        (tree / key).write_bytes(data)
    versions = {"ds.pkr": (3, 1), "ds.lmdb": (4, 2), "ds.h5": (4, 2)}
    (tmp_path / "png").mkdir()
    (tmp_path / "png" / "a").mkdir()
    (tmp_path / "png" / "a" / "x.png").write_bytes(sources["b/other.png"])
    for name, (with_webp, without) in versions.items():
        packrec.convert(tree, tmp_path / name)
        ds = packrec.open(tmp_path / name)
        assert ds.info()["format_version"] == with_webp, name
        stored = {key: data for data, _, key in ds}
        assert stored == sources, name
        assert [ds.record(i)["encoding"] for i in range(len(ds))] == ["webp", "webp", "png", "webp"]
        assert ds.verify(deep=True)["problems"] == [], name
        # The eval loader at the images' own scale: a centre crop of 17 x 17 from x = 3 (an odd
        # column, where libwebp's cropping starts a column early), PIL's pixels exactly.
        loader = packrec.Loader(tmp_path / name, batch_size=4, shuffle=False, transform="eval",
                                size=17, resize=17, output="numpy", threads=1)
        images, _ = next(iter(loader))
        for image, key in zip(images, sorted(sources)):
            assert numpy.array_equal(image, pil_rgb(sources[key])[:, 3:20]), (name, key)
        packrec.convert(tmp_path / "png", tmp_path / ("png-" + name))
        assert packrec.open(tmp_path / ("png-" + name)).info()["format_version"] == without, name
    # extract writes the stored files back, byte for byte.
    cli(["extract", tmp_path / "ds.lmdb", tmp_path / "out"])
    for key, data in sources.items():
        assert (tmp_path / "out" / key).read_bytes() == data, key
    # h5py sees encoding 4 and the bytes as they came.
    import h5py
    with h5py.File(tmp_path / "ds.h5", "r") as f:
        assert list(f["encoding"][:]) == [4, 4, 2, 4]


def test_webp_region_decode_matches_a_crop_of_the_whole_image():
    """A region decoded by libwebp's cropping (what the loader's random-resized-crop asks for)
    equals the same region of the whole image decoded, lossy and lossless, at odd and even
    corners and at the image's edges."""
    big = RNG.integers(0, 256, (61, 77, 3), dtype=numpy.uint8)
    regions = [(1, 3, 20, 31), (0, 0, 61, 77), (5, 8, 40, 9), (60, 76, 1, 1), (2, 2, 3, 3),
               (0, 70, 61, 7)]
    regions += [tuple(int(v) for v in (y, x, RNG.integers(1, 62 - y), RNG.integers(1, 78 - x)))
                for y, x in RNG.integers(0, 60, (20, 2))]
    for name, data in (("lossless", webp(big, lossless=True)), ("lossy", webp(big, quality=90))):
        whole = pil_rgb(data)
        for y, x, h, w in regions:
            region = packrec.decode(data, region=(y, x, h, w))
            assert numpy.array_equal(region, whole[y:y + h, x:x + w]), (name, (y, x, h, w))


def test_animated_webp_keeps_its_first_frame_as_a_png(tmp_path):
    (tmp_path / "tree" / "a").mkdir(parents=True)
    frames = [Image.fromarray(RGB), Image.fromarray(255 - RGB)]
    frames[0].save(tmp_path / "tree" / "a" / "anim.webp", save_all=True, append_images=frames[1:],
                   lossless=True, duration=100)
    source = (tmp_path / "tree" / "a" / "anim.webp").read_bytes()
    packrec.convert(tmp_path / "tree", tmp_path / "ds.pkr")
    data, _, key = packrec.open(tmp_path / "ds.pkr")[0]
    assert key == "a/anim.png" and data[:8] == b"\x89PNG\r\n\x1a\n"
    assert numpy.array_equal(ours_rgb(data), pil_rgb(source))
    with pytest.raises(packrec.errors.InvalidInputError, match="animated WebP"):
        packrec.decode(source)


def test_webp_transcodes_with_quality_and_crosses_webdataset(tmp_path):
    (tmp_path / "tree" / "a").mkdir(parents=True)
    (tmp_path / "tree" / "a" / "x.webp").write_bytes(WEBP_CASES["lossy"]())
    packrec.convert(tmp_path / "tree", tmp_path / "q.pkr", quality=90)
    data, _, key = packrec.open(tmp_path / "q.pkr")[0]
    assert key == "a/x.jpg" and data[:2] == b"\xff\xd8"
    packrec.convert(tmp_path / "tree", tmp_path / "w.pkr")
    cli(["convert", tmp_path / "w.pkr", tmp_path / "wds", "--format", "wds"])
    with tarfile.open(next((tmp_path / "wds").glob("*.tar"))) as tar:
        assert [m.name.rsplit(".", 1)[1] for m in tar.getmembers()][:2] == ["webp", "cls"]
    packrec.convert(next((tmp_path / "wds").glob("*.tar")), tmp_path / "back.pkr")
    assert packrec.open(tmp_path / "back.pkr")[0][0] == (tmp_path / "tree" / "a" / "x.webp").read_bytes()
