"""The text of a PDF that Chromium prints (Skia: Type0 fonts with a ToUnicode map, Flate-compressed content
streams), enough for tests to read what a printed page says: each text-showing operation's glyphs mapped back to
characters through its font's ToUnicode map, text runs (and lines) joined by a space, pages by a newline. Not a general PDF
reader."""

from __future__ import annotations

import re
import unicodedata
import zlib

_START = re.compile(rb"(\d+) 0 obj\b")
_BFCHAR = re.compile(rb"beginbfchar(.*?)endbfchar", re.DOTALL)
_BFRANGE = re.compile(rb"beginbfrange(.*?)endbfrange", re.DOTALL)
_HEX = re.compile(rb"<([0-9A-Fa-f]*)>")
_BLOCK = re.compile(rb"\bBT\b(.*?)\bET\b", re.DOTALL)
_TOKEN = re.compile(rb"/([A-Za-z0-9_.+-]+)\s+[\d.]+\s+Tf|\[(.*?)\]\s*TJ|<([0-9A-Fa-f]*)>\s*Tj"
                    rb"|[-\d.]+\s+([-\d.]+)\s+T[dD]\b|(\bTm\b|T\*)", re.DOTALL)


def _objects(data: bytes) -> dict[int, tuple[bytes, bytes | None]]:
    """Each object: its dictionary text and its (inflated) stream, if any (a stream is read by its ``/Length``:
    its bytes may hold anything, "endobj" too)."""
    out: dict[int, tuple[bytes, bytes | None]] = {}
    at = 0
    while (match := _START.search(data, at)) is not None:
        body_start = match.end()
        end = data.find(b"endobj", body_start)
        stream = data.find(b"stream", body_start)
        if stream == -1 or stream > end:
            out[int(match.group(1))] = (data[body_start:end], None)
            at = end
            continue
        head = data[body_start:stream]
        begin = stream + len(b"stream") + (2 if data[stream + 6:stream + 8] == b"\r\n" else 1)
        length = re.search(rb"/Length\s+(\d+)(\s+0\s+R)?", head)
        stop = begin + int(length.group(1)) if length and not length.group(2) else data.find(b"endstream", begin)
        raw = data[begin:stop]
        out[int(match.group(1))] = (head, zlib.decompress(raw) if b"/FlateDecode" in head else raw)
        at = data.find(b"endobj", stop)
    return out


def _unicode_map(cmap: bytes) -> dict[int, str]:
    """A ToUnicode CMap's glyph -> text (its bfchar and bfrange entries)."""
    table: dict[int, str] = {}
    for block in _BFCHAR.findall(cmap):
        codes = _HEX.findall(block)
        for src, dst in zip(codes[::2], codes[1::2], strict=False):
            table[int(src, 16)] = bytes.fromhex(dst.decode()).decode("utf-16-be")
    for block in _BFRANGE.findall(cmap):
        for line in block.strip().splitlines():
            codes = _HEX.findall(line)
            if len(codes) < 3:
                continue
            low, high, first = int(codes[0], 16), int(codes[1], 16), bytes.fromhex(codes[2].decode()).decode("utf-16-be")
            for offset in range(high - low + 1):
                table[low + offset] = first[:-1] + chr(ord(first[-1]) + offset)
    return table


def _ref(head: bytes, key: bytes) -> int | None:
    match = re.search(rb"/" + key + rb"\s+(\d+) 0 R", head)
    return int(match.group(1)) if match else None


def pdf_text(data: bytes) -> str:
    """The text of ``data`` (a PDF Chromium printed), page by page."""
    objects = _objects(data)
    pages = []
    for head, _ in objects.values():
        if not re.search(rb"/Type\s*/Page\b", head):
            continue
        fonts_block = re.search(rb"/Font\s*<<(.*?)>>", head, re.DOTALL)
        fonts: dict[bytes, dict[int, str]] = {}
        for name, number in re.findall(rb"/([A-Za-z0-9_.+-]+)\s+(\d+) 0 R", fonts_block.group(1) if fonts_block else b""):
            cmap = _ref(objects.get(int(number), (b"", None))[0], b"ToUnicode")
            fonts[name] = _unicode_map(objects[cmap][1] or b"") if cmap in objects else {}
        contents = re.search(rb"/Contents\s+(\d+) 0 R", head)
        stream = objects[int(contents.group(1))][1] or b"" if contents else b""
        font: dict[int, str] = {}
        runs = []
        for block in _BLOCK.findall(stream):  # one text run: its glyphs placed one by one
            text = ""
            for name, array, single, dy, newline in _TOKEN.findall(block):
                if name:
                    font = fonts.get(name, {})
                elif newline or (dy and float(dy) != 0):
                    text += " "
                elif not dy:
                    hexes = _HEX.findall(array) if array else [single]
                    text += "".join(font.get(int(h[i:i + 4], 16), "") for h in hexes for i in range(0, len(h), 4))
            runs.append(text.strip())
        pages.append(" ".join(runs))
    return unicodedata.normalize("NFKC", "\n".join(pages))  # a ligature ("ﬁ") as its letters
