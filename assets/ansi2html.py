#!/usr/bin/env python3
"""Turns a `tmux capture-pane -e -p` dump (SGR escapes only) into a self-contained HTML page
that looks like a dark terminal: one <div> per row, one <span> per run of one style.
Usage: ansi2html.py SCREEN.ansi > screen.html"""
import html
import re
import sys

PALETTE = [
    "#1e1e2e", "#f38ba8", "#a6e3a1", "#f9e2af", "#89b4fa", "#f5c2e7", "#94e2d5", "#bac2de",
    "#585b70", "#f38ba8", "#a6e3a1", "#f9e2af", "#89b4fa", "#f5c2e7", "#94e2d5", "#a6adc8",
]
FG, BG = "#cdd6f4", "#1e1e2e"


def color_256(n):
    if n < 16:
        return PALETTE[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return "#%02x%02x%02x" % (steps[n // 36], steps[n // 6 % 6], steps[n % 6])
    level = 8 + (n - 232) * 10
    return "#%02x%02x%02x" % (level, level, level)


def apply(style, params):
    codes = [int(p) if p else 0 for p in params.split(";")] if params else [0]
    i = 0
    while i < len(codes):
        code = codes[i]
        if code == 0:
            style.clear()
        elif code in (1, 2, 7):
            style[{1: "bold", 2: "dim", 7: "reverse"}[code]] = True
        elif code == 22:
            style.pop("bold", None)
            style.pop("dim", None)
        elif code == 27:
            style.pop("reverse", None)
        elif 30 <= code <= 37 or 90 <= code <= 97:
            style["fg"] = PALETTE[code - 30 if code < 90 else code - 82]
        elif 40 <= code <= 47 or 100 <= code <= 107:
            style["bg"] = PALETTE[code - 40 if code < 100 else code - 92]
        elif code in (38, 48) and i + 1 < len(codes):
            key = "fg" if code == 38 else "bg"
            if codes[i + 1] == 5:
                style[key] = color_256(codes[i + 2])
                i += 2
            elif codes[i + 1] == 2:
                style[key] = "#%02x%02x%02x" % tuple(codes[i + 2:i + 5])
                i += 4
        elif code == 39:
            style.pop("fg", None)
        elif code == 49:
            style.pop("bg", None)
        i += 1


def css(style):
    fg, bg = style.get("fg", FG), style.get("bg", BG)
    if style.get("reverse"):
        fg, bg = bg, fg
    rules = ["color:" + fg]
    if bg != BG:
        rules.append("background:" + bg)
    if style.get("bold"):
        rules.append("font-weight:bold")
    if style.get("dim"):
        rules.append("opacity:0.6")
    return ";".join(rules)


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    rows = []
    style = {}
    for line in text.rstrip("\n").split("\n"):
        out = []
        for part in re.split(r"(\x1b\[[0-9;]*m)", line):
            match = re.fullmatch(r"\x1b\[([0-9;]*)m", part)
            if match:
                apply(style, match.group(1))
            elif part:
                out.append('<span style="%s">%s</span>' % (css(style), html.escape(part)))
        rows.append("<div>%s</div>" % ("".join(out) or "&nbsp;"))
    print(
        "<!doctype html><meta charset=utf-8><style>"
        "body{margin:0;background:%s}"
        "pre{margin:0;padding:12px;font:15px/1.2 'DejaVu Sans Mono',monospace;color:%s;"
        "white-space:pre}div{height:18px}</style><pre>%s</pre>" % (BG, FG, "".join(rows))
    )


main()
