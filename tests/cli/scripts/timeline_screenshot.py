#!/usr/bin/env python3
"""Renders memsim's HTML timeline in headless Chromium and checks the screenshot shows the plot:
the stacked areas (category colours), the reserved and device-used lines and the capacity limit
line (their colours from sim/report/timeline.cc), not a blank page.
Usage: timeline_screenshot.py MEMSIM CHROMIUM WORKDIR
"""
import os, shutil, struct, subprocess, sys, tempfile, zlib

# Colours drawn by sim/report/timeline.cc.
ACTIVATION = (0xe1, 0x57, 0x59)  # the activation category (stacked area, fill-opacity 0.85 over a band)
RESERVED = (0x22, 0x22, 0x22)
DEVICE = (0x7b, 0x2f, 0xbf)
CAPACITY = (0xd0, 0x00, 0x00)


def read_png(path):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB/RGBA non-interlaced PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, "unsupported PNG layout"
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


def count(rows, color, tol):
    return sum(1 for row in rows for p in row if all(abs(p[k] - color[k]) <= tol for k in range(3)))


def main():
    memsim, chromium, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    html, png = os.path.join(work, "timeline.html"), os.path.join(work, "timeline.png")
    subprocess.run([memsim, "run", "graphs/resnet18.json", "--batch", "8", "--optimizer", "adam", "--gpu", "T4",
                    "--capacity", "2500000000", "--timeline", html], check=True, capture_output=True)
    profile = tempfile.mkdtemp(prefix="memsim-chromium-")
    try:
        if os.path.exists(png):
            os.remove(png)
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                        "--user-data-dir=" + profile, "--window-size=1100,700", "--screenshot=" + png,
                        "file://" + os.path.abspath(html)], check=True, capture_output=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    w, h, rows = read_png(png)
    found = {"non-white": sum(1 for row in rows for p in row if min(p) < 240),
             "stacked activations": count(rows, ACTIVATION, 40), "reserved line": count(rows, RESERVED, 12),
             "device-used line": count(rows, DEVICE, 30), "capacity line": count(rows, CAPACITY, 30)}
    need = {"non-white": 20000, "stacked activations": 5000, "reserved line": 300, "device-used line": 300,
            "capacity line": 800}
    print("%dx%d screenshot: %s" % (w, h, found))
    missing = [k for k in need if found[k] < need[k]]
    if missing:
        print("timeline screenshot lacks: " + ", ".join("%s (%d pixels, need %d)" % (k, found[k], need[k]) for k in missing))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
