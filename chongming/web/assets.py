"""The dashboard's stylesheet and script, served by the package itself (no network, no CDN).

Kept as strings so the package needs no data files. The script does one
thing: it re-fetches the page's live fragment (HTML the server rendered and
escaped) every couple of seconds and swaps it in, pausing while the tab is
hidden. The page works without it; only the live updates need it.
"""

from __future__ import annotations

__all__ = ["CSS", "JS"]

CSS = """
:root { --fg: #1d2330; --muted: #5b6473; --line: #d9dde4; --bg: #f6f7f9; --card: #fff;
  --accent: #2450a6; --ok: #1f7a3d; --bad: #b3261e; --warn: #9a5b00; --idle: #6b7280; }
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--fg); background: var(--bg); }
header { display: flex; gap: 1.5rem; align-items: center; padding: .6rem 1.2rem;
  background: #18233a; color: #fff; }
header a { color: #dbe4ff; text-decoration: none; }
header a.here { color: #fff; font-weight: 600; border-bottom: 2px solid #8fb0ff; }
header .brand { font-weight: 700; letter-spacing: .02em; color: #fff; }
header .store { margin-left: auto; color: #b8c4dd; font-size: 12px; }
main { padding: 1rem 1.2rem 3rem; max-width: 1400px; }
h1 { font-size: 20px; margin: .2rem 0 .8rem; }
h2 { font-size: 16px; margin: 1.4rem 0 .5rem; }
table { border-collapse: collapse; width: 100%; background: var(--card);
  border: 1px solid var(--line); }
th, td { text-align: left; padding: .35rem .55rem; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { background: #eef1f5; font-weight: 600; font-size: 12px; color: var(--muted); }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.text, .text { white-space: pre-wrap; word-break: break-word; unicode-bidi: isolate; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; }
a { color: var(--accent); }
.badge { display: inline-block; padding: 0 .45rem; border-radius: 9px; font-size: 12px;
  font-weight: 600; background: #e6e9ef; color: var(--idle); }
.badge.running, .badge.starting { background: #e1ecff; color: var(--accent); }
.badge.succeeded { background: #dff3e5; color: var(--ok); }
.badge.failed, .badge.lost { background: #fbe3e1; color: var(--bad); }
.badge.paused, .badge.pausing, .badge.stopping, .badge.retry_wait {
  background: #fdf0d8; color: var(--warn); }
.badge.stopped, .badge.cancelled, .badge.skipped { background: #ececec; color: #444; }
form.filters { display: flex; flex-wrap: wrap; gap: .5rem; align-items: end;
  margin-bottom: .8rem; }
form.filters label { display: flex; flex-direction: column; font-size: 12px;
  color: var(--muted); }
input, select, button { font: inherit; padding: .25rem .45rem; border: 1px solid #b9c0cc;
  border-radius: 5px; background: #fff; }
button { cursor: pointer; background: #eef2fb; }
button.danger { background: #fbe3e1; border-color: #e4a29c; }
.counts { display: flex; flex-wrap: wrap; gap: .4rem; margin: .2rem 0 .8rem; }
.counts a { text-decoration: none; }
.pager { margin: .6rem 0; display: flex; gap: 1rem; }
.live { font-size: 12px; color: var(--muted); }
.card { background: var(--card); border: 1px solid var(--line); padding: .8rem 1rem;
  margin-bottom: 1rem; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem;
  margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
progress { width: 320px; height: 14px; vertical-align: middle; }
.failure { border-left: 4px solid var(--bad); background: #fff6f5; }
.warning { border-left: 4px solid var(--warn); background: #fff9ed; padding: .5rem .8rem;
  margin: .5rem 0; }
.notice { border-left: 4px solid var(--accent); background: #eef3ff; padding: .5rem .8rem;
  margin: .5rem 0; }
.error { border-left: 4px solid var(--bad); background: #fff6f5; padding: .5rem .8rem; }
ol.timeline { list-style: none; padding: 0; margin: 0; border-left: 2px solid var(--line); }
ol.timeline li { position: relative; padding: .3rem 0 .5rem 1rem; }
ol.timeline li::before { content: ""; position: absolute; left: -6px; top: .7rem;
  width: 10px; height: 10px; border-radius: 50%; background: var(--idle); }
ol.timeline li.user::before { background: var(--warn); }
ol.timeline li.end::before { background: var(--fg); }
ol.timeline .meta { color: var(--muted); font-size: 12px; }
.controls { display: flex; gap: .6rem; flex-wrap: wrap; align-items: center; }
.controls form { display: inline-flex; gap: .3rem; }
svg.states { width: 100%; max-width: 1100px; background: #fff; border: 1px solid var(--line); }
svg.states .edge { fill: none; stroke: #c3c9d3; stroke-width: 1.2; }
svg.states .edge.taken { stroke: var(--accent); stroke-width: 2.6; }
svg.states .arrowhead { fill: #c3c9d3; }
svg.states .arrowhead.taken { fill: var(--accent); }
svg.states .state rect { fill: #f4f6f9; stroke: #9aa3b2; stroke-width: 1.2; }
svg.states .state.terminal rect { stroke-width: 2.4; }
svg.states .state.visited rect { fill: #e1ecff; }
svg.states .state.current rect { fill: #ffd75e; stroke: #9a5b00; stroke-width: 3; }
svg.states .state text { font-size: 13px; fill: var(--fg); }
svg.states .state.current text { font-weight: 700; }
.flag { font-weight: 700; color: var(--bad); }
ol.journal li.run::before { background: var(--accent); border-radius: 2px; }
ol.journal li.step::before { background: var(--ok); width: 8px; height: 8px; left: -5px; }
ol.journal li.wait::before { background: var(--warn); }
ol.journal li.fact::before { background: #7b4fc4; }
ol.journal li.effect::before { background: #0f766e; border-radius: 1px; }
ol.journal li.bad::before { background: var(--bad); }
ol.journal li.run { font-weight: 600; }
pre.preview { margin: .2rem 0 0; padding: .25rem .4rem; background: #f4f6f9; max-height: 6em;
  overflow: auto; font-size: 12px; }
svg.chart { display: block; background: #fff; border: 1px solid var(--line); max-width: 100%;
  height: auto; margin-bottom: .4rem; }
svg.chart text { fill: var(--fg); font-family: system-ui, sans-serif; }
.muted { color: var(--muted); }
"""

JS = """
(function () {
  "use strict";
  var region = document.querySelector("[data-live]");
  if (!region) { return; }
  var url = region.getAttribute("data-live");
  var every = Number(region.getAttribute("data-every") || "2000");
  var state = document.getElementById("live-state");
  var last = null;
  function say(text) { if (state) { state.textContent = text; } }
  function controls(fragment) {
    var box = document.getElementById("controls");
    var ended = fragment.querySelector("[data-terminal='1']");
    if (box && ended) { box.hidden = true; }
  }
  function tick() {
    if (document.hidden) { return; }
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (!response.ok || response.redirected) {
          say("updates paused (" + response.status + "); reload the page");
          return null;
        }
        return response.text();
      })
      .then(function (html) {
        if (html === null) { return; }
        if (html !== last) {
          region.innerHTML = html;  // server-rendered and escaped
          last = html;
          controls(region);
        }
        say("live \\u00b7 updated " + new Date().toLocaleTimeString());
        var updates = Number(region.getAttribute("data-updates") || "0") + 1;
        region.setAttribute("data-updates", String(updates));
      })
      .catch(function () { say("offline; retrying"); });
  }
  controls(region);
  window.setInterval(tick, every);
})();
"""
