"""Render ``report.html`` in a real headless browser and save the whole page as a PNG.

    python tools/report_screenshot.py demo/report.html docs/images/report-demo.png

The browser is Chromium (``--browser`` names another binary; ``apt-get install chromium``
on Debian). The page is drawn at ``--width`` CSS pixels across and tall enough for all of it,
then the blank strip below the content is cut off. The script checks what a browser adds to the
suite's pure-Python checks (``tests/namesrv_pipeline/test_pipeline_report.py``): that Chromium loads
the page, that every figure's image decodes there (the DOM Chromium dumps holds each ``img``,
and the screenshot has content down to the last table), and it prints the figures it found.
Look at the PNG afterwards: whether each plot reads right is for a person to judge.

Exit status: 0 written; 1 a check failed; 2 no browser or no report.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image, ImageChops

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TALL_PX = 16_000
"""The page is drawn this tall first; what lies below the content is cut off afterwards."""
MARGIN_PX = 24


def find_browser(named: str | None) -> str | None:
    for name in (named,) if named else BROWSERS:
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


def chromium(browser: str, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )


def trimmed(shot: Path) -> Image.Image:
    """The screenshot without the blank strip below the page's content."""
    image = Image.open(shot).convert("RGB")
    background = Image.new("RGB", image.size, image.getpixel((0, image.height - 1)))
    box = ImageChops.difference(image, background).getbbox()
    if box is None:
        raise SystemExit("the screenshot is blank: the page drew nothing")
    return image.crop((0, 0, image.width, min(image.height, box[3] + MARGIN_PX)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path, help="report.html")
    ap.add_argument("out", type=Path, help="the PNG to write")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--browser", help="the browser binary (default: the first Chromium found)")
    args = ap.parse_args(argv)
    browser = find_browser(args.browser)
    if browser is None:
        print("no Chromium found: apt-get install chromium, or --browser", file=sys.stderr)
        return 2
    if not args.report.is_file():
        print(f"no report at {args.report}", file=sys.stderr)
        return 2
    url = args.report.resolve().as_uri()
    page = args.report.read_text(encoding="utf-8")
    figures = re.findall(r'<figure id="([^"]+)"><img alt="([^"]+)"', page)
    dom = chromium(browser, "--dump-dom", url)
    shown = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,', dom.stdout)
    if dom.returncode != 0 or len(shown) != len(figures):
        print(
            f"Chromium loaded {len(shown)} of {len(figures)} figures "
            f"(exit {dom.returncode}): {dom.stderr[-2000:]}",
            file=sys.stderr,
        )
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        shot = Path(tmp) / "page.png"
        done = chromium(
            browser, f"--window-size={args.width},{TALL_PX}", f"--screenshot={shot}", url
        )
        if done.returncode != 0 or not shot.is_file():
            print(f"Chromium drew no screenshot: {done.stderr[-2000:]}", file=sys.stderr)
            return 1
        image = trimmed(shot)
    if image.height >= TALL_PX - MARGIN_PX:
        print(f"the page is taller than {TALL_PX} px: its end is cut off", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # A page of flat colours: 256 of them keep it as it looks at a quarter of the bytes.
    flat = image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    flat.save(args.out, optimize=True)
    print(f"{args.out}: {image.width} x {image.height} px, {len(figures)} figures:")
    for key, title in figures:
        print(f"  {key}: {title}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
