"""The report's inline stylesheet and script (the file must work offline, so nothing is linked)."""

STYLE = """
:root { --fg: #1a202c; --muted: #4a5568; --line: #e2e8f0; --bg: #ffffff; --accent: #2b6cb0; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
       background: var(--bg); margin: 0 auto; padding: 16px 24px 48px; max-width: 1400px; }
h1 { font-size: 22px; margin: 4px 0 8px; }
h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 0 0 6px; }
p { margin: 4px 0; }
.muted { color: var(--muted); }
code, pre { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.controls { display: flex; gap: 10px; align-items: center; margin: 10px 0; flex-wrap: wrap; }
.controls input { width: 320px; padding: 5px 8px; border: 1px solid #cbd5e0; border-radius: 4px; }
.controls select { padding: 5px; border: 1px solid #cbd5e0; border-radius: 4px; }
.table-wrap { overflow-x: auto; max-height: 80vh; overflow-y: auto; border: 1px solid var(--line); }
table.symptoms { border-collapse: collapse; width: 100%; font-size: 13px; }
table.symptoms td.effects { font-size: 11px; color: var(--muted); white-space: nowrap; }
.site { font-size: 11px; }
table.symptoms th, table.symptoms td { border-bottom: 1px solid var(--line); padding: 4px 6px;
       text-align: left; vertical-align: top; }
table.symptoms th { position: sticky; top: 0; background: #f7fafc; cursor: pointer; user-select: none;
       white-space: nowrap; }
table.symptoms th[aria-sort="ascending"]::after { content: " \\25B2"; }
table.symptoms th[aria-sort="descending"]::after { content: " \\25BC"; }
table.symptoms tbody tr:hover { background: #f7fafc; }
.sev { display: inline-block; padding: 0 6px; border-radius: 9px; font-size: 12px; white-space: nowrap; }
.sev-crash { background: #fed7d7; color: #742a2a; }
.sev-timeout { background: #fbd38d; color: #652b19; }
.sev-misleads { background: #c6f6d5; color: #22543d; }
.sev-breaks_training { background: #feebc8; color: #7b341e; }
.sev-degrades { background: #fefcbf; color: #744210; }
.sev-cost_only { background: #e9d8fd; color: #44337a; }
.sev-unjudged { background: #ffffff; color: #4a5568; border: 1px dashed #a0aec0; }
.sev-silent { background: #e2e8f0; color: #2d3748; }
.sev-invalid { background: #edf2f7; color: #718096; }
.disagree { outline: 2px dashed #c53030; outline-offset: 1px; }
.mutants { display: grid; grid-template-columns: repeat(auto-fill, minmax(640px, 1fr)); gap: 14px; }
article.mutant { border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
article.mutant .body { display: flex; gap: 12px; flex-wrap: wrap; align-items: flex-start; }
table.numbers { border-collapse: collapse; font-size: 12px; }
table.numbers td, table.numbers th { padding: 1px 6px; border-bottom: 1px solid var(--line); text-align: right; }
table.numbers th:first-child, table.numbers td:first-child { text-align: left; }
svg.curve { background: #fff; font: 10px system-ui, sans-serif; fill: var(--muted); }
svg.curve .plot { fill: #fcfcfd; stroke: #cbd5e0; }
svg.curve .grid { stroke: #edf2f7; }
.legend { font-size: 12px; color: var(--muted); }
.legend .swatch { display: inline-block; width: 18px; height: 8px; margin: 0 4px 0 10px; vertical-align: middle; }
pre.diff { background: #f7fafc; border: 1px solid var(--line); padding: 6px 8px; overflow-x: auto;
       max-height: 260px; margin: 6px 0 0; }
pre.diff .add { color: #22543d; background: #f0fff4; display: block; }
pre.diff .del { color: #742a2a; background: #fff5f5; display: block; }
.advice { font-size: 12px; margin: 6px 0 0; }
details summary { cursor: pointer; color: var(--accent); }
"""

SCRIPT = """
(function () {
  "use strict";
  var table = document.getElementById("symptom-table");
  if (!table) { return; }
  var body = table.tBodies[0];
  var filter = document.getElementById("filter");
  var severity = document.getElementById("severity-filter");
  var count = document.getElementById("shown-count");
  var rows = Array.prototype.slice.call(body.rows);

  function sortKey(row, index) {
    var cell = row.cells[index];
    var key = cell.getAttribute("data-sort");
    return key === null ? cell.textContent.trim() : key;
  }

  function compare(a, b, numeric) {
    if (numeric) {
      var x = parseFloat(a), y = parseFloat(b);
      if (isNaN(x) && isNaN(y)) { return 0; }
      if (isNaN(x)) { return 1; }
      if (isNaN(y)) { return -1; }
      return x - y;
    }
    return a.localeCompare(b);
  }

  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (header, index) {
    header.addEventListener("click", function () {
      var ascending = header.getAttribute("aria-sort") !== "ascending";
      var numeric = header.getAttribute("data-type") === "number";
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (other) {
        other.removeAttribute("aria-sort");
      });
      header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      rows.sort(function (r1, r2) {
        var order = compare(sortKey(r1, index), sortKey(r2, index), numeric);
        return ascending ? order : -order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });

  function applyFilter() {
    var words = filter.value.toLowerCase().split(/\\s+/).filter(Boolean);
    var level = severity.value;
    var shown = 0;
    rows.forEach(function (row) {
      var text = row.textContent.toLowerCase();
      var visible = words.every(function (word) { return text.indexOf(word) !== -1; }) &&
        (!level || row.getAttribute("data-severity") === level);
      row.hidden = !visible;
      var article = document.getElementById(row.getAttribute("data-target"));
      if (article) { article.hidden = !visible; }
      if (visible) { shown += 1; }
    });
    count.textContent = shown + " of " + rows.length + " shown";
  }

  filter.addEventListener("input", applyFilter);
  severity.addEventListener("change", applyFilter);
  applyFilter();
})();
"""
