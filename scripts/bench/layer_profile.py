"""Per-layer times of one net on both sides, side by side.

Poseidon's come from `poseidon_train time --profile=FILE` (one
"layer forward_ms backward_ms" line per layer of the net it built, the
Split layers it inserts included). PyTorch's come from torch.profiler over
the caffe_net.py translation of the same prototxt (Note [Attributing
PyTorch's backward]).

Note [Attributing PyTorch's backward]
Each step of the translated net (one Caffe layer, or a BatchNorm with the
Scale folded into it) runs inside record_function(<layer name>), so its
forward time is that range's length. Every forward op that records an
autograd node carries the node's sequence number, and the autograd engine
wraps each node's backward in an "autograd::engine::evaluate_function: ..."
range carrying the same number: so a backward range belongs to the layer
whose forward range held the op with that number. The nodes that
accumulate parameter gradients (AccumulateGrad) carry no number; the engine
runs each as soon as it is ready, right after the backward of the layer
whose parameter it is, so it is charged to the layer of the range before
it. What is left (the seed of the backward pass) is reported as
unattributed. The profiler adds a few microseconds per op to both
directions; the profiled totals are printed beside the sums.
"""

import time

BACKWARD_PREFIX = "autograd::engine::evaluate_function"


def torch_layer_times(model, step, iterations):
    """Profiles `iterations` calls of step() (forward + backward of model).

    `model` is a caffe_net Net. Returns {"steps": [{"layers": [names],
    "forward_ms", "backward_ms"}], "unattributed_backward_ms",
    "forward_ms", "backward_ms"} (averages per iteration; the last two are
    wall-clock totals of the profiled iterations).
    """
    from torch.profiler import ProfilerActivity, profile

    model.record_layers = True
    label_of = {names[0]: i for i, names in enumerate(model.step_layers)}
    n = len(model.step_layers)
    forward_us, backward_us = [0.0] * n, [0.0] * n
    wall_f = wall_b = 0.0
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(iterations):
            f, b = step()
            wall_f += f
            wall_b += b
    model.record_layers = False
    top = sorted((e for e in prof.events() if e.cpu_parent is None),
                 key=lambda e: e.time_range.start)
    owner = {}  # sequence number -> step index
    for e in top:
        i = label_of.get(e.name)
        if i is None:
            continue
        forward_us[i] += e.time_range.elapsed_us()
        stack = list(e.cpu_children)
        while stack:
            child = stack.pop()
            if child.sequence_nr >= 0:
                owner[child.sequence_nr] = i
            stack.extend(child.cpu_children)
    unattributed = 0.0
    last = None
    for e in top:
        if not e.name.startswith(BACKWARD_PREFIX):
            continue
        i = owner.get(e.sequence_nr) if e.sequence_nr >= 0 else last
        if i is None:
            unattributed += e.time_range.elapsed_us()
            continue
        backward_us[i] += e.time_range.elapsed_us()
        last = i
    scale = 1e-3 / iterations
    return {
        "steps": [{"layers": model.step_layers[i],
                   "forward_ms": forward_us[i] * scale,
                   "backward_ms": backward_us[i] * scale} for i in range(n)],
        "unattributed_backward_ms": unattributed * scale,
        "forward_ms": 1e3 * wall_f / iterations,
        "backward_ms": 1e3 * wall_b / iterations,
    }


def read_poseidon_profile(path):
    """[(layer, forward_ms, backward_ms)] from `time --profile` output."""
    rows = []
    with open(path) as handle:
        for number, line in enumerate(handle, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 3:
                raise ValueError("%s:%d: expected 'layer forward_ms "
                                 "backward_ms', got %r" % (path, number, line))
            rows.append((parts[0], float(parts[1]), float(parts[2])))
    return rows


def merge(analysis, poseidon, torch_result):
    """One row per layer (BatchNorm + Scale together), in net order.

    analysis: net_cost.analyse() of the net; poseidon: read_poseidon_profile
    rows or None; torch_result: torch_layer_times() or None. Each row:
    {label, type, gflop, poseidon: (fwd, bwd) or None, pytorch: ... }.
    """
    kinds = {l["name"]: l["type"] for l in analysis["layers"]}
    flops = {l["name"]: l["forward_flops"] + l["backward_flops"]
             for l in analysis["layers"]}
    steps = torch_result["steps"] if torch_result else []
    step_of = {}
    for i, s in enumerate(steps):
        for name in s["layers"]:
            step_of[name] = i
    if poseidon is not None:
        order = [(name, (f, b)) for name, f, b in poseidon]
    else:
        order = [(l["name"], None) for l in analysis["layers"]]
    rows, row_of_step = [], {}
    for name, times in order:
        i = step_of.get(name)
        if i is not None and i in row_of_step:
            row = row_of_step[i]  # the Scale of a folded BatchNorm
            row["label"] += "+" + name
            row["type"] += "+" + kinds.get(name, "?")
            row["gflop"] += flops.get(name, 0) / 1e9
            if times and row["poseidon"]:
                row["poseidon"] = (row["poseidon"][0] + times[0],
                                   row["poseidon"][1] + times[1])
            continue
        kind = kinds.get(name, "Split")  # inserted by Poseidon
        row = {"label": name, "type": kind,
               "gflop": flops.get(name, 0) / 1e9, "poseidon": times,
               "pytorch": None}
        if i is not None:
            row["pytorch"] = (steps[i]["forward_ms"], steps[i]["backward_ms"])
            row_of_step[i] = row
        rows.append(row)
    return rows


def _ms(pair, which):
    return "-" if pair is None else "%.2f" % pair[which]


def _total(pair):
    return None if pair is None else pair[0] + pair[1]


def format_rows(rows, top=0):
    """The per-layer table; with top > 0 only the `top` rows where Poseidon
    spends the most time beyond PyTorch, largest first."""
    shown = rows
    if top > 0:
        both = [r for r in rows if r["poseidon"] and r["pytorch"]]
        shown = sorted(both, key=lambda r: _total(r["pytorch"]) -
                       _total(r["poseidon"]))[:top]
    lines = ["%-34s %-20s %7s %17s %17s %7s %15s" % (
        "layer", "type", "GFLOP", "poseidon fwd/bwd", "pytorch fwd/bwd",
        "ratio", "GFLOP/s p | t")]
    for r in shown:
        p, t = _total(r["poseidon"]), _total(r["pytorch"])
        rate = "-"
        if r["gflop"] and (p or t):
            rate = "%s | %s" % (
                "%.1f" % (r["gflop"] / p * 1e3) if p else "-",
                "%.1f" % (r["gflop"] / t * 1e3) if t else "-")
        lines.append("%-34s %-20s %7s %17s %17s %7s %15s" % (
            r["label"][:34], r["type"][:20],
            "%.3f" % r["gflop"] if r["gflop"] else "",
            "%s/%s" % (_ms(r["poseidon"], 0), _ms(r["poseidon"], 1)),
            "%s/%s" % (_ms(r["pytorch"], 0), _ms(r["pytorch"], 1)),
            "%.2f" % (t / p) if p and t else "-", rate))
    lines.append("(ms per iteration; ratio = pytorch / poseidon, > 1: "
                 "Poseidon faster)")
    return lines


def type_summary(rows):
    """{type: {layers, poseidon: [fwd, bwd], pytorch: [fwd, bwd], gflop}}."""
    out = {}
    for r in rows:
        s = out.setdefault(r["type"], {"layers": 0, "poseidon": [0.0, 0.0],
                                       "pytorch": [0.0, 0.0], "gflop": 0.0})
        s["layers"] += 1
        s["gflop"] += r["gflop"]
        for side in ("poseidon", "pytorch"):
            if r[side]:
                s[side][0] += r[side][0]
                s[side][1] += r[side][1]
    return out


def format_summary(summary, unattributed=None):
    lines = ["%-20s %6s %8s %22s %22s %7s" % (
        "type", "layers", "GFLOP", "poseidon fwd/bwd/sum",
        "pytorch fwd/bwd/sum", "ratio")]
    items = sorted(summary.items(),
                   key=lambda kv: -max(sum(kv[1]["poseidon"]),
                                       sum(kv[1]["pytorch"])))
    for kind, s in items:
        p, t = sum(s["poseidon"]), sum(s["pytorch"])
        lines.append("%-20s %6d %8s %22s %22s %7s" % (
            kind[:20], s["layers"], "%.2f" % s["gflop"] if s["gflop"] else "",
            "%.1f/%.1f/%.1f" % (s["poseidon"][0], s["poseidon"][1], p),
            "%.1f/%.1f/%.1f" % (s["pytorch"][0], s["pytorch"][1], t),
            "%.2f" % (t / p) if p and t else "-"))
    if unattributed:
        lines.append("(PyTorch: %.2f ms of backward per iteration charged to "
                     "no layer: the backward seed and autograd bookkeeping)"
                     % unattributed)
    return lines


def timed_step(model, blobs):
    """A step() for torch_layer_times: forward + backward, their seconds."""
    def step():
        start = time.perf_counter()
        loss = model(blobs)
        middle = time.perf_counter()
        loss.backward()
        return middle - start, time.perf_counter() - middle
    return step
