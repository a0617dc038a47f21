"""The page template and helpers the run report and the history page share, so both look the same."""

from __future__ import annotations

import base64
import html
import io

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402


def escape(x) -> str:
    return html.escape(str(x))


def section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{escape(title)}</h2>\n{body}\n</section>'


def table(header, rows, css: str = "", escaped: bool = True) -> str:
    esc = escape if escaped else str
    head = "".join(f"<th>{escape(h)}</th>" for h in header) if any(header) else ""
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{css}">' + (f"<tr>{head}</tr>" if head else "") + body + "</table>"


def folded(title: str, body: str) -> str:
    """A long table closed until clicked (<details>): `title` is HTML."""
    return f"<details><summary><b>{title}</b></summary>\n{body}\n</details>"


def img(fig, alt: str) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}">'


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1em; }}
td, th {{ border: 1px solid #ccc; padding: 3px 8px; text-align: left; font-size: 14px; vertical-align: top; }}
th {{ background: #f2f2f2; }}
section {{ border-top: 2px solid #2e86c1; margin-top: 1.5em; }}
.ok {{ color: #1e8449; }} .bad, table.bad td {{ color: #b03a2e; }} .dim {{ color: #888; font-size: 12px; }}
img {{ max-width: 100%; }}
details {{ margin: 0.6em 0; }} summary {{ cursor: pointer; }}
</style></head>
<body><h1>{title}</h1>
{body}
</body></html>
"""
