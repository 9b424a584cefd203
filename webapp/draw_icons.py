"""Draws the web app's icons from one geometry, with the standard library only: the SVG the pages
use as their favicon, and the PNGs the manifest lists (``any`` with rounded corners, ``maskable``
full-bleed with the drawing inside the 80 % safe circle, and Apple's touch icon).

    python -m webapp.draw_icons     # rewrites static/icon.svg and app/icons/*.png

A phone outlined in white on blue, with an amber notification dot. Each pixel's coverage comes from
the signed distance to each shape (a one-pixel ramp), which anti-aliases the edges.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from webapp.assets import PACKAGE

UNITS = 512  # the drawing's coordinate square
BLUE = (29, 78, 216)
WHITE = (255, 255, 255)
AMBER = (251, 191, 36)
CORNER = 112  # the "any" icon's corner radius
PHONE_CENTRE, PHONE_HALF, PHONE_RADIUS, PHONE_STROKE = (256.0, 264.0), (76.0, 148.0), 30.0, 26.0
BAR_FROM, BAR_TO, BAR_RADIUS = (236.0, 374.0), (276.0, 374.0), 7.0
DOT_CENTRE, DOT_RADIUS, DOT_GAP = (338.0, 128.0), 52.0, 18.0

Distance = Callable[[float, float], float]  # signed, in drawing units: negative inside


@dataclass(frozen=True)
class Icon:
    path: str
    size: int
    full_bleed: bool  # no transparent corners (maskable, Apple)
    scale: float  # the drawing's size around the centre (0.8 keeps it in the maskable safe circle)


ICONS = (
    Icon("app/icons/icon-192.png", 192, full_bleed=False, scale=1.0),
    Icon("app/icons/icon-512.png", 512, full_bleed=False, scale=1.0),
    Icon("app/icons/maskable-192.png", 192, full_bleed=True, scale=0.8),
    Icon("app/icons/maskable-512.png", 512, full_bleed=True, scale=0.8),
    Icon("app/icons/apple-touch-icon.png", 180, full_bleed=True, scale=0.8),
)


def rounded_box(centre: tuple[float, float], half: tuple[float, float], radius: float) -> Distance:
    def distance(x: float, y: float) -> float:
        qx = abs(x - centre[0]) - half[0] + radius
        qy = abs(y - centre[1]) - half[1] + radius
        outside = math.hypot(max(qx, 0.0), max(qy, 0.0))
        return outside + min(max(qx, qy), 0.0) - radius

    return distance


def circle(centre: tuple[float, float], radius: float) -> Distance:
    return lambda x, y: math.hypot(x - centre[0], y - centre[1]) - radius


def capsule(start: tuple[float, float], end: tuple[float, float], radius: float) -> Distance:
    def distance(x: float, y: float) -> float:
        dx, dy = end[0] - start[0], end[1] - start[1]
        t = max(0.0, min(1.0, ((x - start[0]) * dx + (y - start[1]) * dy) / (dx * dx + dy * dy)))
        return math.hypot(x - start[0] - t * dx, y - start[1] - t * dy) - radius

    return distance


def outline(shape: Distance, width: float) -> Distance:
    return lambda x, y: abs(shape(x, y)) - width / 2


def layers(full_bleed: bool) -> list[tuple[Distance, tuple[int, int, int]]]:
    """The shapes bottom to top; the dot's gap is a ring of the background colour."""
    half = UNITS / 2
    background = rounded_box((half, half), (half, half), 0.0 if full_bleed else CORNER)
    phone = rounded_box(PHONE_CENTRE, PHONE_HALF, PHONE_RADIUS)
    return [
        (background, BLUE),
        (outline(phone, PHONE_STROKE), WHITE),
        (capsule(BAR_FROM, BAR_TO, BAR_RADIUS), WHITE),
        (circle(DOT_CENTRE, DOT_RADIUS + DOT_GAP), BLUE),
        (circle(DOT_CENTRE, DOT_RADIUS), AMBER),
    ]


def render(icon: Icon) -> bytes:
    """The icon as PNG bytes (8-bit RGBA)."""
    shapes = layers(icon.full_bleed)
    units_per_pixel = UNITS / icon.size
    rows = []
    for row in range(icon.size):
        line = bytearray(b"\x00")  # filter: none
        for column in range(icon.size):
            x, y = ((column + 0.5) * units_per_pixel, (row + 0.5) * units_per_pixel)
            line += bytes(_pixel(shapes, icon, x, y, units_per_pixel))
        rows.append(bytes(line))
    return _png(icon.size, b"".join(rows))


def _pixel(
    shapes: list[tuple[Distance, tuple[int, int, int]]], icon: Icon, x: float, y: float, unit: float
) -> tuple[int, int, int, int]:
    red = green = blue = alpha = 0.0
    for index, (distance, colour) in enumerate(shapes):
        if index == 0:  # the background is never scaled
            d = distance(x, y)
        else:  # the drawing shrinks around the centre, so distances shrink with it
            centre = UNITS / 2
            d = distance(centre + (x - centre) / icon.scale, centre + (y - centre) / icon.scale) * icon.scale
        cover = max(0.0, min(1.0, 0.5 - d / unit))
        if cover == 0.0:
            continue
        # "over" compositing, premultiplied
        red = colour[0] * cover + red * (1 - cover)
        green = colour[1] * cover + green * (1 - cover)
        blue = colour[2] * cover + blue * (1 - cover)
        alpha = cover + alpha * (1 - cover)
    if alpha == 0.0:
        return (0, 0, 0, 0)
    return (round(red / alpha), round(green / alpha), round(blue / alpha), round(alpha * 255))


def _png(size: int, raw: bytes) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)  # 8-bit RGBA
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


def svg() -> str:
    """The same drawing as SVG (the favicon)."""
    (cx, cy), (hx, hy) = PHONE_CENTRE, PHONE_HALF
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {UNITS} {UNITS}">'
        f'<rect width="{UNITS}" height="{UNITS}" rx="{CORNER}" fill="{_hex(BLUE)}"/>'
        f'<rect x="{cx - hx}" y="{cy - hy}" width="{2 * hx}" height="{2 * hy}" rx="{PHONE_RADIUS}" '
        f'fill="none" stroke="{_hex(WHITE)}" stroke-width="{PHONE_STROKE}"/>'
        f'<line x1="{BAR_FROM[0]}" y1="{BAR_FROM[1]}" x2="{BAR_TO[0]}" y2="{BAR_TO[1]}" '
        f'stroke="{_hex(WHITE)}" stroke-width="{2 * BAR_RADIUS}" stroke-linecap="round"/>'
        f'<circle cx="{DOT_CENTRE[0]}" cy="{DOT_CENTRE[1]}" r="{DOT_RADIUS + DOT_GAP}" fill="{_hex(BLUE)}"/>'
        f'<circle cx="{DOT_CENTRE[0]}" cy="{DOT_CENTRE[1]}" r="{DOT_RADIUS}" fill="{_hex(AMBER)}"/>'
        "</svg>\n"
    )


def _hex(colour: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*colour)


def main() -> None:
    (PACKAGE / "static" / "icon.svg").write_text(svg(), encoding="utf-8")
    for icon in ICONS:
        target = PACKAGE / icon.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(render(icon))
        print(f"wrote {Path(icon.path)} ({icon.size}x{icon.size})")


if __name__ == "__main__":
    main()
