"""Draw a partition plan as SVG (and a standalone HTML report), in pure Python.

Layout: a simple layered drawing. Each node's layer is one more than its deepest producer;
within a layer nodes are ordered by the mean position of their producers (two sweeps), which
keeps chains straight. Nodes are coloured by the delegate that runs them; edges inside a
partition are drawn as a wide band in the delegate's colour; edges that cross a partition
boundary (a copy in or out per invoke) are dashed red. Hovering a node or edge shows its
details and, for nodes left on the CPU, every delegate's reason (SVG ``<title>``).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from offload._formatting import node_ranges
from offload._graph import Subgraph
from offload._plan import Plan

__all__ = ["plan_svg", "plan_html"]

CPU_COLOUR = "#d0d4da"
PALETTE = ("#4e9a57", "#3b78c2", "#d4862a", "#8e5bb5", "#c24b7a", "#2a9d9a", "#9a8a2a")
BOUNDARY = "#d62728"
NODE_W, NODE_H, GAP_X, GAP_Y, MARGIN = 150, 34, 26, 30, 24
IO_W, IO_H = 110, 22


def delegate_colours(plan: Plan) -> dict[str, str]:
    colours = {"cpu": CPU_COLOUR}
    for i, name in enumerate(plan.delegates):
        colours[name] = PALETTE[i % len(PALETTE)]
    return colours


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _tensor_label(sg: Subgraph, t: int) -> str:
    tensor = sg.tensors[t]
    return f"tensor {t} {tensor.name!r} {tensor.dtype}{list(tensor.shape)}"


def _nbytes(sg: Subgraph, t: int) -> int:
    tensor = sg.tensors[t]
    count = 1
    for d in tensor.shape:
        count *= max(int(d), 1)
    return count * tensor.dtype.itemsize


def _layout(
    sg: Subgraph,
) -> tuple[dict[str, tuple[float, float]], list[tuple[str, str, int]], float, float]:
    """Positions of every drawn item ("n5", "in0", "out3") and the edges between them."""
    producer = {t: f"n{n}" for t, n in sg.producers().items()}
    for t in sg.inputs:
        producer.setdefault(t, f"in{t}")
    edges: list[tuple[str, str, int]] = []
    for node in sg.nodes:
        for t in node.inputs:
            if t >= 0 and t in producer and not sg.tensors[t].is_constant:
                edges.append((producer[t], f"n{node.index}", t))
    for t in sg.outputs:
        if t in producer:
            edges.append((producer[t], f"out{t}", t))
    parents: dict[str, list[str]] = {}
    for a, b, _ in edges:
        parents.setdefault(b, []).append(a)
    layer: dict[str, int] = {f"in{t}": 0 for t in sg.inputs}
    for node in sg.nodes:  # nodes are stored in execution (topological) order
        key = f"n{node.index}"
        layer[key] = 1 + max((layer.get(p, 0) for p in parents.get(key, [])), default=0)
    deepest = max(layer.values(), default=0)
    for t in sg.outputs:
        layer[f"out{t}"] = deepest + 1
    rows: dict[int, list[str]] = {}
    for key, k in layer.items():
        rows.setdefault(k, []).append(key)
    order: dict[str, float] = {}
    for k in sorted(rows):
        for i, key in enumerate(rows[k]):
            order[key] = float(i)
    for _ in range(2):
        for k in sorted(rows):

            def bary(key: str) -> float:
                ps = [order[p] for p in parents.get(key, []) if p in order]
                return sum(ps) / len(ps) if ps else order[key]

            rows[k].sort(key=lambda key: (bary(key), order[key]))
            for i, key in enumerate(rows[k]):
                order[key] = float(i)
    width = max(len(r) for r in rows.values()) * (NODE_W + GAP_X) - GAP_X + 2 * MARGIN + 150
    pos: dict[str, tuple[float, float]] = {}
    for k, keys in rows.items():
        row_w = len(keys) * (NODE_W + GAP_X) - GAP_X
        x0 = (width - row_w) / 2
        for i, key in enumerate(keys):
            pos[key] = (
                x0 + i * (NODE_W + GAP_X) + NODE_W / 2,
                MARGIN + k * (NODE_H + GAP_Y) + NODE_H / 2,
            )
    height = MARGIN * 2 + (max(rows) + 1) * (NODE_H + GAP_Y) - GAP_Y + 40
    return pos, edges, float(width), float(height)


def _marker(marker_id: str, fill: str) -> str:
    return (
        f'<marker id="{marker_id}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" '
        'markerHeight="8" markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{fill}"/></marker>'
    )


def _edge(d: str, title: str, boundary: bool = False) -> str:
    if boundary:
        kind, stroke = (
            "edge boundary",
            f'stroke="{BOUNDARY}" stroke-width="2.2" stroke-dasharray="6,3"',
        )
        marker = "arrow-b"
    else:
        kind, stroke, marker = "edge", 'stroke="#555" stroke-width="1.3"', "arrow"
    return (
        f'<g class="{kind}"><title>{_esc(title)}</title>'
        f'<path d="{d}" {stroke} fill="none" marker-end="url(#{marker})"/></g>'
    )


def _rect(x: float, y: float, w: float, h: float, rx: float, fill: str, stroke: str) -> str:
    return (
        f'<rect x="{x - w / 2:.1f}" y="{y - h / 2:.1f}" width="{w}" height="{h}" rx="{rx}" '
        f'fill="{fill}" stroke="{stroke}" stroke-width="1.2"/>'
    )


def _text(x: float, y: float, text: str, extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="middle" {extra}>{_esc(text)}</text>'


def plan_svg(plan: Plan, unavailable: dict[str, str] | None = None) -> str:
    """The plan's graph as a standalone SVG document."""
    unavailable = unavailable or {}
    sg = plan.subgraph
    colours = delegate_colours(plan)
    owner: dict[str, tuple[str, int | None]] = {}
    for p in plan.partitions:
        for n in p.nodes:
            owner[f"n{n}"] = (p.delegate, p.index)
    for n in plan.cpu_nodes():
        owner[f"n{n}"] = ("cpu", None)
    pos, edges, width, height = _layout(sg)
    total_h = height + 24 * (len(plan.delegates) + 3)
    out: list[str] = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{total_h:.0f}" '
        f'viewBox="0 0 {width:.0f} {total_h:.0f}" '
        'font-family="Helvetica, Arial, sans-serif" font-size="12">',
        "<style>.node:hover rect{stroke:#000;stroke-width:3}.edge:hover path{stroke-width:4}"
        "</style>",
        f"<defs>{_marker('arrow', '#555')}{_marker('arrow-b', BOUNDARY)}</defs>",
        '<rect width="100%" height="100%" fill="white"/>',
    ]

    def half_h(key: str) -> float:
        return NODE_H / 2 if key.startswith("n") else IO_H / 2

    bands: list[str] = []
    lines: list[str] = []
    for a, b, t in edges:
        (x1, y1), (x2, y2) = pos[a], pos[b]
        y1 += half_h(a)
        y2 -= half_h(b)
        dy = max((y2 - y1) / 2, 12)
        # an edge that skips layers bends sideways so it does not run behind the nodes between
        bend = 0.0 if y2 - y1 <= NODE_H + GAP_Y + 1 else (NODE_W / 2 + 24) / 0.75
        d = (
            f"M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1 + dy:.1f} "
            f"{x2 + bend:.1f},{y2 - dy:.1f} {x2:.1f},{y2:.1f}"
        )
        (da, pa), (db, pb) = owner.get(a, ("io", None)), owner.get(b, ("io", None))
        label = _tensor_label(sg, t)
        if pa is not None and pa == pb:
            bands.append(
                f'<path d="{d}" stroke="{colours[da]}" stroke-width="14" stroke-opacity="0.35" '
                'fill="none" stroke-linecap="round"/>'
            )
            lines.append(_edge(d, f"{label} (inside {da} partition {pa})"))
        elif pa != pb:
            what = []
            if pa is not None:
                what.append(f"copied out of {da} partition {pa}")
            if pb is not None:
                what.append(f"copied into {db} partition {pb}")
            boundary = f"partition boundary: {label}, {_nbytes(sg, t)} bytes "
            lines.append(_edge(d, boundary + " and ".join(what) + " per invoke", boundary=True))
        else:
            lines.append(_edge(d, label))
    out += bands + lines
    fallback_reasons = _cpu_reasons(plan)
    for key, (x, y) in pos.items():
        if not key.startswith("n"):
            t = int(key[3:] if key.startswith("out") else key[2:])
            kind = "output" if key.startswith("out") else "input"
            out.append(
                f'<g class="io"><title>{_esc(f"model {kind}: {_tensor_label(sg, t)}")}</title>'
                + _rect(x, y, IO_W, IO_H, 11, "white", "#777")
                + _text(x, y + 4, sg.tensors[t].name[:18] or kind, 'font-size="10"')
                + "</g>"
            )
            continue
        n = int(key[1:])
        node = sg.nodes[n]
        delegate, part = owner[key]
        title = [node.describe()]
        if part is None:
            title.append("runs on: CPU reference")
            title += [f"{d}: {r}" for d, r in fallback_reasons.get(n, [])]
        else:
            status = (
                f" (unavailable here: {unavailable[delegate]})" if delegate in unavailable else ""
            )
            title.append(f"runs on: {delegate} partition {part}{status}")
        for side, tensors in (("inputs", node.inputs), ("outputs", node.outputs)):
            title.append(f"{side}: " + ", ".join(_tensor_label(sg, t) for t in tensors if t >= 0))
        op = node.op_name
        badge = f"#{n}" + (f" · P{part}" if part is not None else "")
        out.append(
            f'<g class="node" data-node="{n}" data-delegate="{_esc(delegate)}">'
            f"<title>{_esc(chr(10).join(title))}</title>"
            + _rect(x, y, NODE_W, NODE_H, 6, colours[delegate], "#333")
            + _text(x, y - 2, op[:20], 'font-weight="bold"')
            + _text(x, y + 11, badge, 'font-size="10" fill="#222"')
            + "</g>"
        )
    out.append(f'<g class="legend" transform="translate({MARGIN},{height:.0f})">')
    entries = [("cpu", "CPU reference")] + [
        (d, d + (f" (unavailable here: {unavailable[d]})" if d in unavailable else ""))
        for d in plan.delegates
    ]
    for i, (name, text) in enumerate(entries):
        out.append(
            f'<rect x="0" y="{i * 24}" width="18" height="16" rx="3" fill="{colours[name]}" '
            f'stroke="#333"/><text x="26" y="{i * 24 + 12}">{_esc(text)}</text>'
        )
    i = len(entries)
    out.append(
        f'<path d="M0,{i * 24 + 8} L18,{i * 24 + 8}" stroke="{BOUNDARY}" stroke-width="2.2" '
        f'stroke-dasharray="6,3"/><text x="26" y="{i * 24 + 12}">partition boundary '
        "(tensor copied per invoke)</text></g>"
    )
    out.append("</svg>")
    return "\n".join(out)


def _cpu_reasons(plan: Plan) -> dict[int, list[tuple[str, str]]]:
    reasons: dict[int, list[tuple[str, str]]] = {}
    for n in plan.cpu_nodes():
        for d in plan.delegates:
            r = plan.model_rejections.get(d) or plan.node_reasons.get(d, {}).get(n)
            if r:
                reasons.setdefault(n, []).append((d, r))
    return reasons


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def plan_html(report: dict[str, Any], plan: Plan, unavailable: dict[str, str] | None = None) -> str:
    """A standalone HTML page: the check report's tables and the plan's graph."""
    colours = delegate_colours(plan)
    model = report["model"]
    parts: list[str] = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>offload check: {_esc(model['path'])}</title>",
        "<style>body{font-family:Helvetica,Arial,sans-serif;margin:24px;color:#222}"
        "table{border-collapse:collapse;margin:8px 0 18px}td,th{border:1px solid #ccc;"
        "padding:3px 8px;text-align:left;font-size:13px}th{background:#f2f2f2}"
        ".swatch{display:inline-block;width:12px;height:12px;border:1px solid #333;"
        "margin-right:6px;vertical-align:middle}.graph{overflow:auto;border:1px solid #ddd}"
        "</style></head><body>",
        f"<h1>offload check: {_esc(model['path'])}</h1>",
        f"<p>Model type <b>{_esc(model['model_type'])}</b> ({_esc(model['model_type_reason'])}); "
        f"{model['nodes']} nodes, {model['tensors']} tensors, "
        f"{model['subgraphs']} subgraph(s).</p>",
        "<h2>Partition plan</h2>",
    ]
    rows: list[tuple[Any, ...]] = []
    for name, d in report["plan"]["delegates"].items():
        swatch = f"<span class='swatch' style='background:{colours.get(name, CPU_COLOUR)}'></span>"
        rows.append(
            (
                swatch,
                name,
                "yes" if d["available"] else f"no: {d['reason']}",
                len(d["nodes"]),
                len(d["partitions"]),
                d["boundary_tensors"],
                d["bytes_copied_per_invoke"],
                d["rejected_model"] or "",
            )
        )
    cpu = report["plan"]["cpu"]
    rows.append(
        (
            f"<span class='swatch' style='background:{CPU_COLOUR}'></span>",
            "cpu",
            "yes",
            len(cpu["nodes"]),
            "",
            "",
            "",
            "",
        )
    )
    head = [
        "",
        "delegate",
        "available",
        "nodes",
        "partitions",
        "boundary tensors",
        "bytes copied / invoke",
        "model rejected",
    ]
    body = "".join(
        "<tr><td>" + r[0] + "</td>" + "".join(f"<td>{_esc(c)}</td>" for c in r[1:]) + "</tr>"
        for r in rows
    )
    parts.append(
        "<table id='delegates'><thead><tr>"
        + "".join(f"<th>{_esc(h)}</th>" for h in head)
        + f"</tr></thead><tbody>{body}</tbody></table>"
    )
    part_rows = [
        (
            p["index"],
            p["delegate"],
            node_ranges(p["nodes"]),
            len(p["inputs"]),
            len(p["outputs"]),
            p["bytes_copied_per_invoke"],
        )
        for p in report["plan"]["partitions"]
    ]
    if part_rows:
        parts.append("<h3>Partitions</h3><div id='partitions'>")
        parts.append(
            _table(
                ["partition", "delegate", "nodes", "inputs", "outputs", "bytes copied / invoke"],
                part_rows,
            )
        )
        parts.append("</div>")
    fb_rows = [
        (
            f["op"],
            f"{len(r['nodes'])} of {f['count']}",
            r["delegate"],
            r["reason"],
            node_ranges(r["nodes"]),
        )
        for f in report["fallback"]
        for r in (
            f["reasons"]
            or [{"delegate": "", "reason": "no delegate requested", "nodes": f["nodes"]}]
        )
    ]
    if fb_rows:
        parts.append("<h3>Left on the CPU, per op</h3>")
        parts.append(
            _table(["op", "nodes (of those on CPU)", "delegate", "reason", "node indices"], fb_rows)
        )
    parts.append("<h3>Op histogram</h3>")
    parts.append(_table(["op", "count"], list(report["op_histogram"].items())))
    parts.append(
        "<h2>Graph</h2><p>Hover a node for its delegate and fallback reasons; "
        "dashed red edges cross a partition boundary.</p><div class='graph'>"
    )
    parts.append(plan_svg(plan, unavailable))
    parts.append("</div></body></html>")
    return "\n".join(parts)
