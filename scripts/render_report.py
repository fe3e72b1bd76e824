"""Render a banmf HTML report (``banmf report``) to a PNG with headless Chromium: what the page
looks like at 1280 px, without opening a browser by hand.

python scripts/render_report.py REPORT.html OUT.png [--width 1280] [--height 2400]
                                [--browser chromium]

Needs a Chromium (Debian's ``chromium`` package, ``chromium-browser`` or ``google-chrome``);
exits with 2 and says so when none is found. The page is loaded from the file itself, so this
also shows that it needs nothing from the network.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser(name: str | None) -> str | None:
    """The path of the browser named, or of the first of :data:`BROWSERS` installed."""
    for candidate in (name,) if name else BROWSERS:
        path = shutil.which(candidate)
        if path:
            return path
    return None


def render(html: Path, png: Path, browser: str, width: int, height: int) -> None:
    """Screenshot ``html`` into ``png`` (a temporary file renamed over it when complete)."""
    with tempfile.TemporaryDirectory() as profile:
        tmp = png.with_name(f".{png.name}.tmp.png")
        command = [
            browser,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",  # root in containers and CI: the sandbox cannot start there
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--screenshot={tmp}",
            html.resolve().as_uri(),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0 or not tmp.exists():
            tmp.unlink(missing_ok=True)
            raise RuntimeError(
                f"{browser} failed ({done.returncode}): {done.stderr.strip()[-500:]}"
            )
        tmp.replace(png)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html", type=Path, help="the report (banmf report --out)")
    parser.add_argument("png", type=Path, help="the screenshot to write")
    parser.add_argument("--width", type=int, default=1280, help="window width (default 1280)")
    parser.add_argument("--height", type=int, default=2400, help="window height (default 2400)")
    parser.add_argument("--browser", help=f"the browser (default: the first of {BROWSERS})")
    args = parser.parse_args(argv)
    if not args.html.is_file():
        print(f"render_report: {args.html}: no such file", file=sys.stderr)
        return 2
    browser = find_browser(args.browser)
    if browser is None:
        print(
            "render_report: no Chromium found (apt-get install chromium, or --browser PATH)",
            file=sys.stderr,
        )
        return 2
    render(args.html, args.png, browser, args.width, args.height)
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
