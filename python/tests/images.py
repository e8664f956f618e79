"""The images the DAG tests' stand-ins write (``samples/mandelbrot``), read
back: binary PPMs, and PNGs with unfiltered rows in stored deflate blocks."""

import pathlib
import zlib
from typing import Optional


def read_ppm(path: pathlib.Path) -> tuple[int, int, bytes]:
    """A binary PPM's width, height and RGB bytes (as the stand-ins write it)."""
    data = path.read_bytes()
    magic, width, height, maxval, rgb = data.split(maxsplit=4)
    assert (magic, maxval) == (b"P6", b"255"), path
    w, h = int(width), int(height)
    assert len(rgb) == w * h * 3, path
    return w, h, rgb


def read_png(path: pathlib.Path) -> tuple[int, int, bytes]:
    """An 8-bit RGB PNG's width, height and RGB bytes (its rows unfiltered, as
    the stand-in montage writes them)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    at, idat = 8, b""
    header: Optional[bytes] = None
    while at < len(data):
        n = int.from_bytes(data[at : at + 4], "big")
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + n]
        assert zlib.crc32(kind + body) == int.from_bytes(data[at + 8 + n : at + 12 + n], "big")
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        at += 12 + n
    assert header is not None, f"{path} has no IHDR chunk"
    w, h = int.from_bytes(header[0:4], "big"), int.from_bytes(header[4:8], "big")
    assert header[8:] == bytes([8, 2, 0, 0, 0]), "not 8-bit RGB"
    raw, stride = zlib.decompress(idat), w * 3 + 1
    assert len(raw) == h * stride and all(raw[y * stride] == 0 for y in range(h))
    return w, h, b"".join(raw[y * stride + 1 : (y + 1) * stride] for y in range(h))


def tile_of(image: bytes, w: int, col: int, row: int, tw: int, th: int) -> bytes:
    """The RGB bytes of the tile at (col, row), tw x th pixels, of an image w wide."""
    starts = (((row * th + y) * w + col * tw) * 3 for y in range(th))
    return b"".join(image[at : at + tw * 3] for at in starts)
