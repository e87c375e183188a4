"""packrec's decoded pixels against PIL's Image.open(...).convert("RGB") (torchvision's loader),
image mode by image mode (docs/decoding.md): equal, or different by the documented rule."""
import io
import struct
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
    Image.fromarray(RGB).save(tmp_path / "tree" / "a" / "web.webp")
    with pytest.raises(packrec.errors.InvalidInputError, match="P3 .ASCII or 1-bit. is not read"):
        packrec.convert(tmp_path / "tree", tmp_path / "x.pkr")
    stats = packrec.convert(tmp_path / "tree", tmp_path / "x.pkr", on_error="skip")
    assert stats["records_written"] == 1 and len(stats["rejects"]) == 2
    rejects = (tmp_path / "x.pkr" / "rejects.tsv").read_text()
    assert "WebP" in rejects and "P3" in rejects
