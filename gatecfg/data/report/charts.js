/* gatecfg report: draws each gate's chart from the JSON beside it with uPlot (bundled beside this file).
   Hover a point for its run, commit, date, value, status and why it is in or out of the baseline; click
   it to open the run's CI job; drag to zoom, shift-drag to pan, ctrl+wheel to zoom, double-click to reset.
   Every text from the store is set with textContent: nothing from it is parsed as HTML. */
(() => {
  "use strict";
  const runs = JSON.parse(document.getElementById("gatecfg-runs").textContent);
  const COLORS = {
    value: "#1f4e79", fail: "#c0392b", hand: "#7f7f7f", ref: "#2e7d32", band: "rgba(165,214,167,0.55)",
    lone: "#e57373", limit: "#c0392b", regime: "#eceff1", boundary: "#90a4ae", model: "#6a1b9a",
  };
  const FONT = "12px system-ui, -apple-system, 'Segoe UI', sans-serif";
  const HEIGHT = 320;

  const fmt = (v) => (v === null || v === undefined ? "-" : String(Number(Number(v).toPrecision(6))));
  // As gatecfg.band.near: to the decimals the spread makes meaningful, as `history` and `evaluate` print.
  const near = (v, sd) => {
    if (sd === null || !(sd > 0)) return fmt(v);
    const decimals = 1 - Math.floor(Math.log10(sd));
    return decimals >= 0 && decimals <= 12 && Math.abs(v) < 1e15 ? v.toFixed(decimals) : fmt(Number(v.toPrecision(3)));
  };
  const sized = (u, values) => (values ? Math.ceil(Math.max(...values.map((v) => v.length)) * 7.2 + 18) : 50);
  const points = (stroke, fill, size) => ({ show: true, size, stroke, fill, width: 1.5 });
  const only = (values, keep) => values.map((v, i) => (keep(i) ? v : null));
  // A chart of nights points at a run per night; a curve over steps is one run's.
  const runOf = (spec, i) => runs[Array.isArray(spec.run) ? spec.run[i] : spec.run];

  function series(spec) {
    const n = spec.value.length;
    const s = [{}];
    const data = [spec.x];
    const add = (values, opts) => { data.push(values); s.push(opts); return s.length - 1; };
    const hi = add(spec.band[1], { stroke: "transparent", width: 0, points: { show: false } });
    const lo = add(spec.band[0], { stroke: "transparent", width: 0, points: { show: false } });
    add(spec.ref, { stroke: COLORS.ref, width: 1.2, dash: [6, 4], points: { show: false } });
    for (const edge of spec.lone) add(edge, { stroke: COLORS.lone, width: 1, dash: [2, 3], points: { show: false } });
    for (const limit of spec.limits) add(new Array(n).fill(limit[1]), { stroke: COLORS.limit, width: 1, dash: [2, 2], points: { show: false } });
    const nights = spec.kind === "nights";
    add(spec.value, {
      stroke: COLORS.value, width: nights ? 1 : 1.4, alpha: 1,
      points: nights ? points(COLORS.value, COLORS.value, 4) : { show: false },
    });
    if (nights) {
      add(only(spec.value, (i) => !spec.joins[i] && !spec.hand[i]), { paths: () => null, points: points(COLORS.fail, COLORS.fail, 7) });
      add(only(spec.value, (i) => spec.hand[i]), { paths: () => null, points: points(COLORS.hand, COLORS.hand, 7) });
    }
    // A failed night is ringed (its dot says whether it is in the baseline); a failing step is a red dot.
    const ring = nights ? points(COLORS.fail, "rgba(0,0,0,0)", 11) : points(COLORS.fail, COLORS.fail, 7);
    add(only(spec.value, (i) => spec.failed[i]), { paths: () => null, points: ring });
    return { s, data, bands: [{ series: [hi, lo], fill: COLORS.band }] };
  }

  function tooltip(spec, i) {
    const lines = [];
    const run = runOf(spec, i);
    if (spec.kind === "steps") lines.push(["step", String(spec.x[i])]);
    lines.push(["run", run[0]], ["commit", run[1] || "-"], ["date", run[2]]);
    const sd = spec.sd[i], n = (v) => near(v, sd);
    const spread = sd === null ? "" : ` ± ${n(sd)}`;
    lines.push(["value", spec.ref[i] === null ? n(spec.value[i]) : `${n(spec.value[i])} vs ${n(spec.ref[i])}${spread}`]);
    lines.push(["status", spec.statuses[spec.status[i]]]);
    if (spec.kind === "nights") lines.push(["baseline", spec.marks[spec.mark[i]]]);
    if (spec.ref[i] !== null) {
      const side = (v, open) => (v === null ? open : n(v));
      const what = spec.sd[i] === null ? "band" : "fails alone";
      lines.push([what, `${side(spec.lo[i], "-inf")} to ${side(spec.hi[i], "inf")}`]);
    }
    if (run[3]) lines.push(["", "click: open the CI run"]);
    return lines;
  }

  function regimes(spec) {
    if (!spec.regimes || !spec.regimes.length) return {};
    const px = (u, x) => u.valToPos(x, "x", true);
    const clip = (u, draw) => {
      const { left, top, width, height } = u.bbox;
      u.ctx.save();
      u.ctx.beginPath();
      u.ctx.rect(left, top, width, height);
      u.ctx.clip();
      draw(u.ctx, top, height);
      u.ctx.restore();
    };
    return {
      drawClear: [(u) => clip(u, (ctx, top, height) => {
        ctx.fillStyle = COLORS.regime;
        for (const r of spec.regimes) if (r.shade) ctx.fillRect(px(u, r.start - 0.5), top, px(u, r.end + 0.5) - px(u, r.start - 0.5), height);
      })],
      draw: [(u) => clip(u, (ctx, top, height) => {
        const ratio = uPlot.pxRatio;
        ctx.font = FONT.replace("12px", `${12 * ratio}px`);
        for (const r of spec.regimes) {
          if (r.model) {
            ctx.strokeStyle = COLORS.model;
            ctx.lineWidth = 1.4 * ratio;
            ctx.beginPath();
            ctx.moveTo(px(u, r.model[0][0]), u.valToPos(r.model[0][1], "y", true));
            ctx.lineTo(px(u, r.model[1][0]), u.valToPos(r.model[1][1], "y", true));
            ctx.stroke();
          }
          if (r.label) {
            const x = px(u, r.start - 0.5);
            ctx.strokeStyle = COLORS.boundary;
            ctx.lineWidth = ratio;
            ctx.beginPath();
            ctx.moveTo(x, top);
            ctx.lineTo(x, top + height);
            ctx.stroke();
            ctx.fillStyle = "#37474f";
            ctx.fillText(r.label, x + 4 * ratio, top + 14 * ratio);
          }
        }
      })],
    };
  }

  function chart(host) {
    const spec = JSON.parse(host.querySelector("script").textContent);
    const { s, data, bands } = series(spec);
    const first = spec.x[0], last = spec.x[spec.x.length - 1];
    const nights = spec.kind === "nights";
    const tip = document.createElement("div");
    tip.className = "tip";
    tip.hidden = true;
    const xAxis = { font: FONT, stroke: "#333", grid: { stroke: "#eee" } };
    if (nights) {
      xAxis.incrs = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];
      xAxis.values = (u, splits) => splits.map((i) => (Number.isInteger(i) && spec.run[i] !== undefined ? runOf(spec, i)[2].slice(0, spec.sameDay ? 16 : 10) : ""));
      xAxis.space = spec.sameDay ? 130 : 90;
    }
    const hooks = regimes(spec);
    hooks.setCursor = [(u) => {
      const i = u.cursor.idx;
      if (i === null || i === undefined || spec.value[i] === null) { tip.hidden = true; u.over.style.cursor = ""; return; }
      tip.replaceChildren(...tooltip(spec, i).map(([k, v]) => {
        const row = document.createElement("div");
        if (k) { const key = document.createElement("b"); key.textContent = `${k} `; row.append(key); }
        row.append(document.createTextNode(v));
        return row;
      }));
      tip.hidden = false;
      const left = u.cursor.left, width = u.over.clientWidth;
      tip.style.left = left > width / 2 ? "" : `${left + 14}px`;
      tip.style.right = left > width / 2 ? `${width - left + 14}px` : "";
      tip.style.top = `${Math.max(0, u.cursor.top - 20)}px`;
      u.over.style.cursor = runOf(spec, i)[3] ? "pointer" : "";
    }];
    const opts = {
      width: Math.max(320, host.clientWidth), height: HEIGHT,
      title: spec.title,
      legend: { show: false },
      scales: {
        x: { time: false, range: (u, min, max) => (min === first && max === last ? [first - 0.5, last + 0.5] : [min, max]) },
        y: { range: () => spec.y },
      },
      axes: [xAxis, { font: FONT, stroke: "#333", grid: { stroke: "#eee" }, size: sized }],
      cursor: { drag: { x: true, y: false }, points: { show: false } },
      series: s,
      bands,
      hooks,
    };
    const u = new uPlot(opts, data, host);
    u.over.append(tip);
    host.gatecfgChart = u; // the tests drive the chart through it

    // Click: the run's CI job, where it is stored; not at the end of a drag (that zoomed).
    let down = null;
    u.over.addEventListener("mousedown", (e) => { down = [e.clientX, e.clientY]; });
    u.over.addEventListener("click", (e) => {
      const dragged = down && Math.hypot(e.clientX - down[0], e.clientY - down[1]) > 3;
      const i = u.cursor.idx;
      if (dragged || i === null || i === undefined || spec.value[i] === null) return;
      const url = runOf(spec, i)[3];
      if (url) window.open(url, "_blank", "noopener");
    });
    // Shift-drag pans, ctrl+wheel zooms at the cursor: both within the history's own range.
    const setX = (min, max) => {
      const span = Math.min(max - min, last - first + 1);
      const lo = Math.min(Math.max(min, first - 0.5), last + 0.5 - span);
      u.setScale("x", { min: lo, max: lo + span });
    };
    host.addEventListener("mousedown", (e) => {
      if (!e.shiftKey) return;
      e.stopPropagation(); // capture phase: uPlot's own drag (a zoom) never starts
      e.preventDefault();
      const start = e.clientX, { min, max } = u.scales.x, perPx = (max - min) / u.over.clientWidth;
      const move = (m) => setX(min - (m.clientX - start) * perPx, max - (m.clientX - start) * perPx);
      const up = () => { document.removeEventListener("mousemove", move); document.removeEventListener("mouseup", up); };
      document.addEventListener("mousemove", move);
      document.addEventListener("mouseup", up);
    }, true);
    u.over.addEventListener("wheel", (e) => {
      if (!e.ctrlKey && !e.metaKey) return; // a plain wheel scrolls the page
      e.preventDefault();
      const { min, max } = u.scales.x;
      const at = u.posToVal(e.offsetX, "x"), factor = e.deltaY < 0 ? 0.75 : 1 / 0.75;
      setX(at - (at - min) * factor, at + (max - at) * factor);
    }, { passive: false });
    new ResizeObserver(() => u.setSize({ width: Math.max(320, host.clientWidth), height: HEIGHT })).observe(host);
    host.setAttribute("data-ready", "true");
  }

  // The charts in the window are drawn at once, the others one per task after them: a page of 80 charts
  // over 1,000 steps opens at once and stays responsive while the rest are drawn.
  const later = [];
  for (const host of document.querySelectorAll(".gate-chart")) {
    if (host.getBoundingClientRect().top < window.innerHeight + 200) chart(host);
    else later.push(host);
  }
  const next = () => { if (later.length) { chart(later.shift()); setTimeout(next, 0); } };
  setTimeout(next, 0);
})();
