"""The page: HTML skeleton, style and script, shipped as package data (plain HTML/CSS/JS in
``assets/``, no build step, nothing fetched from elsewhere).

The script talks to the JSON API of ``wgk.conformance.view.api``; in a static
report it reads the same answers from an embedded ``wgk-data`` block instead.
"""
from __future__ import annotations

import html
import json
from functools import cache
from pathlib import Path

ASSETS = Path(__file__).resolve().parent / "assets"


@cache
def asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


def page(data: dict | None = None, title: str = "wgk view") -> str:
    """The whole page; with ``data`` the stepper reads it instead of the API (a static report)."""
    embedded = ""
    if data is not None:
        text = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
        embedded = f'<script id="wgk-data" type="application/json">{text}</script>\n'
    klass = ' class="static"' if data is not None else ""
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{asset('page.css')}</style></head>\n"
            f"<body{klass}>\n{asset('page.html')}\n{embedded}"
            f"<script>{asset('page.js')}</script>\n</body></html>\n")
