#!/usr/bin/python3
"""image-goldens.py OUT_DIR — the image front end's goldens, made by Pillow (Debian's python3-pil), which is what
the Hugging Face image processors decode and resize with.

Writes small images in every format and pixel layout tern reads, and beside each NAME.EXT the pixels Pillow hands a
processor: NAME.EXT.rgb (raw [h][w][3] u8 after what transformers' image_utils.load_image does: ImageOps.exif_transpose,
then convert("RGB"), which drops an alpha channel and keeps the colour stored under it) and resize goldens resize-WxH.rgb of photo.png under
Image.resize(BICUBIC). index.json lists every file with its size (lossy formats flagged: their decoders may differ
by a level or two)."""
import io
import json
import os
import sys

import numpy as np
from PIL import Image, ImageOps

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)


def smooth(w, h, c):
    """A picture-like field: gradients plus a little noise (pure noise would make every lossy codec look bad)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    planes = [128 + 100 * np.sin(x / (5 + 3 * k) + y / (7 + k)) + rng.normal(0, 12, (h, w)) for k in range(c)]
    return np.clip(np.stack(planes, -1), 0, 255).astype(np.uint8)


def as_processor_sees(im):
    """What the processor gets: image_utils.load_image's exif_transpose and convert("RGB")."""
    return ImageOps.exif_transpose(im).convert("RGB")


index = []


def save(name, im, lossy=False, **kw):
    path = os.path.join(out, name)
    fmt = {"png": "PNG", "jpg": "JPEG", "webp": "WEBP", "gif": "GIF", "bmp": "BMP"}[name.rsplit(".", 1)[1]]
    im.save(path, fmt, **kw)
    seen = as_processor_sees(Image.open(path))
    seen.load()
    with open(path + ".rgb", "wb") as f:
        f.write(np.asarray(seen, dtype=np.uint8).tobytes())
    index.append({"file": name, "width": seen.width, "height": seen.height, "lossy": lossy})


photo = Image.fromarray(smooth(67, 45, 3), "RGB")
save("photo.png", photo)
rgba = smooth(40, 30, 4)
rgba[:, :, 3] = np.linspace(0, 255, 40, dtype=np.uint8)[None, :]  # every alpha from clear to opaque
save("alpha.png", Image.fromarray(rgba, "RGBA"))
save("gray.png", Image.fromarray(smooth(33, 21, 1)[:, :, 0], "L"))
la = smooth(19, 23, 2)
save("gray-alpha.png", Image.fromarray(la, "LA"))
pal = photo.quantize(16)
pal.info["transparency"] = 3  # palette entry 3 is clear
save("palette.png", pal, transparency=3)
save("photo.gif", photo.quantize(64))
save("photo.bmp", photo)
save("photo-lossless.webp", photo, lossless=True)
save("photo.webp", photo, lossy=True, quality=90)
save("photo.jpg", photo, lossy=True, quality=95)
exif = Image.Exif()
exif[0x0112] = 6  # rotate 90 degrees clockwise to display
save("rotated.jpg", photo, lossy=True, quality=95, exif=exif.tobytes())

# The resize goldens: down, up, and mixed, on the lossless photo.
for w, h in [(32, 48), (150, 20), (67, 90), (7, 5), (134, 45)]:
    r = photo.resize((w, h), Image.BICUBIC)
    with open(os.path.join(out, f"resize-{w}x{h}.rgb"), "wb") as f:
        f.write(np.asarray(r, dtype=np.uint8).tobytes())

# An animated PNG and WebP (refused), and a bomb header: a 30000 x 30000 PNG whose data is never reached.
frames = [photo, photo.transpose(Image.FLIP_LEFT_RIGHT)]
frames[0].save(os.path.join(out, "animated.png"), "PNG", save_all=True, append_images=frames[1:])
frames[0].save(os.path.join(out, "animated.webp"), "WEBP", save_all=True, append_images=frames[1:], lossless=True)
big = io.BytesIO()
Image.new("L", (8, 8)).save(big, "PNG")
b = bytearray(big.getvalue())
import struct
import zlib
b[16:24] = struct.pack(">II", 30000, 30000)
b[29:33] = struct.pack(">I", zlib.crc32(bytes(b[12:29])))
with open(os.path.join(out, "bomb.png"), "wb") as f:
    f.write(bytes(b))

with open(os.path.join(out, "index.json"), "w") as f:
    json.dump({"pillow": Image.__version__, "images": index}, f, indent=1)
print(f"{len(index)} images in {out}")
