#!/usr/bin/env python3
"""Remakes samples/images/*.jpg: one small JPEG per inventory item, plus default.jpg.

Run once by hand (needs Pillow: pip install pillow); the JPEGs are committed, so nothing
at build or test time needs Pillow.
"""
import hashlib, json, os
from PIL import Image, ImageDraw, ImageFont

here = os.path.dirname(os.path.abspath(__file__))
items = json.load(open(os.path.join(here, "samplelist.json")))["items"]
out = os.path.join(here, "images")
os.makedirs(out, exist_ok=True)
font = ImageFont.load_default()

def make(name, path):
    h = hashlib.sha256(name.encode()).digest()
    bg = (h[0] // 2 + 100, h[1] // 2 + 100, h[2] // 2 + 100)
    fg = (h[3] // 3 + 40, h[4] // 3 + 40, h[5] // 3 + 40)
    img = Image.new("RGB", (96, 96), bg)
    d = ImageDraw.Draw(img)
    d.ellipse((18, 10, 78, 66), fill=fg)
    d.text((48, 82), name, fill=(20, 20, 20), font=font, anchor="mm")
    img.save(path, "JPEG", quality=80)

# A few items deliberately have no picture: `ferry init --sample` gives them default.jpg.
WITHOUT_PICTURE = {"Kale", "Parsnips", "Turnips"}
for item in items:
    if item["key"] in WITHOUT_PICTURE:
        continue
    make(item["key"], os.path.join(out, item["key"].lower().replace(" ", "-") + ".jpg"))
make("ferry", os.path.join(out, "default.jpg"))
