#!/usr/bin/env python3
"""Renders memsim's HTML timeline in headless Chromium (--dump-dom: the DOM after its script ran)
and reads what a user reads (docs/cli.md, Note [Timeline page]): the headline (plot()'s title),
the y ticks in GiB in increasing order, the x ticks, both axis labels, the capacity and peak
labels, the OOM marker at the op `memsim run --json` names, and one panel per distinct rank.
Usage: timeline_dom.py MEMSIM CHROMIUM WORKDIR
"""
import html.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile

OOM_RUN = ["run", "graphs/alexnet.json", "--batch", "4096", "--optimizer", "adam", "--gpu", "T4"]
STEPS_RUN = ["run", "graphs/mlp.json", "--batch", "32", "--optimizer", "adam", "--steps", "3"]
# Moves the pointer to the middle of the first plot, as a user would, so the tooltip shows.
HOVER = """<script>(function () {
  var svg = document.querySelector("svg.timeline"), b = svg.getBoundingClientRect();
  svg.dispatchEvent(new MouseEvent("mousemove", {clientX: b.left + b.width / 2, clientY: b.top + b.height / 2,
                                                 bubbles: true}));
})();</script>"""
RANKS_RUN = ["run", "graphs/bert_small.json", "--batch", "32", "--optimizer", "adam", "--data-parallel", "4",
             "--gpu", "V100-16GB"]


class Dom(html.parser.HTMLParser):
    """Collects the text of elements by class, the classes of shapes and the body's attributes."""

    def __init__(self):
        super().__init__()
        self.texts, self.shapes, self.stack, self.body, self.panels, self.tip = {}, {}, [], {}, 0, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = a.get("class", "")
        if "memsim-page" in cls.split():
            self.body = a
        if a.get("id") == "memsim-tip":
            self.tip = a
        if tag == "section" and "panel" in cls.split():
            self.panels += 1
        if tag in ("line", "polyline", "polygon", "rect", "circle"):
            self.shapes.setdefault(cls, []).append(a)
        if tag not in ("br", "meta", "line", "rect", "circle"):  # void or self-closed in the dump
            self.stack.append((tag, cls, a.get("id", "")))

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        if self.stack and data.strip():
            _, cls, ident = self.stack[-1]
            for key in cls.split() + (["#" + ident] if ident else []):
                self.texts.setdefault(key, []).append(data.strip())


def dump_dom(chromium, page):
    profile = tempfile.mkdtemp(prefix="memsim-chromium-")
    try:
        out = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                              "--disable-component-update", "--disable-sync", "--no-first-run",
                              "--user-data-dir=" + profile, "--window-size=1200,900", "--dump-dom",
                              "file://" + os.path.abspath(page)], check=True, capture_output=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    dom = Dom()
    dom.feed(out.stdout.decode("utf-8"))
    return dom


def check(cond, what, failures):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def page_of(memsim, args, work, name):
    page = os.path.join(work, name)
    report = json.loads(subprocess.run([memsim] + args + ["--json", "--timeline", page], check=True,
                                       capture_output=True).stdout)
    return page, report


def main():
    memsim, chromium, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    failures = []

    page, report = page_of(memsim, OOM_RUN, work, "oom.html")
    dom = dump_dom(chromium, page)
    check(dom.body.get("data-memsim-ready") == "1", "the page's script ran", failures)
    gib = 1 << 30
    headline = "%s: would need peak reserved %.3g GiB, allocated %.3g GiB" % (
        report["model"], report["peak_reserved_bytes"] / gib, report["peak_allocated_bytes"] / gib)
    check(dom.texts.get("headline") == [headline], "headline %r (plot()'s title)" % headline, failures)
    ticks = dom.texts.get("ytick", [])
    values = [float(t.split()[0]) for t in ticks if t.endswith(" GiB")]
    check(len(ticks) >= 4 and len(values) == len(ticks) and values == sorted(values) and values[0] == 0,
          "y ticks in GiB from 0, increasing: %s" % ticks, failures)
    check(values and values[-1] * gib >= report["peak_reserved_bytes"], "the top y tick covers the peak", failures)
    check(len(dom.shapes.get("gridline", [])) == len(ticks), "a gridline per y tick", failures)
    xt = dom.texts.get("xtick", [])
    check(len(xt) >= 3 and all(t.isdigit() for t in xt), "x ticks are event indices: %s" % xt[:4], failures)
    check(any("memory events in order" in t for t in dom.texts.get("#x-label-0", [])), "x axis label", failures)
    check(dom.texts.get("#y-label-0") == ["GiB"], "y axis label GiB", failures)
    oom = dom.texts.get("oom-label", [])
    check(oom == ["OOM at op " + report["oom_op"]], "OOM label %s (run --json: %s)" % (oom, report["oom_op"]), failures)
    check(len(dom.shapes.get("oom-marker", [])) == 1, "one OOM marker line", failures)
    cap = dom.texts.get("capacity-label", [])
    check(len(cap) == 1 and cap[0].startswith("capacity "), "capacity label %s" % cap, failures)
    check(len(dom.texts.get("peak-label", [])) == 1 and dom.texts["peak-label"][0].startswith("peak live "),
          "peak label", failures)
    check(len(dom.texts.get("reserved-label", [])) == 1, "peak reserved label", failures)
    phases = dom.texts.get("phase-label", [])
    check({"forward", "backward", "optimizer"} <= set(phases), "phase labels %s" % phases, failures)
    hover = os.path.join(work, "oom_hover.html")
    with open(page) as f, open(hover, "w") as out:
        out.write(f.read().replace("</body>", HOVER + "</body>"))
    dom = dump_dom(chromium, hover)
    tip = " ".join(dom.texts.get("#memsim-tip", []))
    check("display: block" in (dom.tip or {}).get("style", "") and tip.startswith("event ") and " live " in tip
          and "reserved " in tip, "a tooltip at the pointer: %r" % tip[:120], failures)

    page, report = page_of(memsim, RANKS_RUN, work, "ranks.html")
    dom = dump_dom(chromium, page)
    distinct = len(report["ranks"]["ranks"]) if isinstance(report.get("ranks"), dict) else len(report["ranks"])
    check(distinct > 1 and dom.panels == distinct, "%d panels for %d distinct ranks" % (dom.panels, distinct),
          failures)
    check(len(dom.texts.get("panel-headline", [])) == distinct, "a headline per panel", failures)

    page, report = page_of(memsim, STEPS_RUN, work, "steps.html")
    dom = dump_dom(chromium, page)
    check(dom.texts.get("step-label") == ["step 1", "step 2", "step 3"], "step labels %s" % dom.texts.get("step-label"),
          failures)
    check(dom.texts.get("phase-label", []).count("backward") == 3, "a backward band per step", failures)
    check(dom.texts.get("y-label-0", dom.texts.get("#y-label-0")) == ["GiB"], "GiB axis (device used > 1 GiB)", failures)
    if failures:
        print("timeline DOM lacks: " + "; ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
