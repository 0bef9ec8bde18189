/* Sharing: downloads of the run as JSON, the per-minute CSV, a chart as PNG. */
import { $, state } from "./state.js";
import { charts } from "./charts.js";

export function download(name, blob) {
  var a = document.createElement("a"), url = URL.createObjectURL(blob);
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
}

export function csv(r) {
  var pm = r.per_minute, cols = ["minute", "dispatched", "executed", "duplicates", "missed", "backlog", "leader"];
  var lines = [cols.join(",")];
  pm.minute.forEach(function (_, i) { lines.push(cols.map(function (c) { return pm[c][i]; }).join(",")); });
  return lines.join("\n") + "\n";
}

export function png(name) {
  var u = charts[name], src = u.ctx.canvas, out = document.createElement("canvas");
  var pad2 = 28 * devicePixelRatio;
  out.width = src.width; out.height = src.height + pad2;
  var c = out.getContext("2d");
  c.fillStyle = "#fff"; c.fillRect(0, 0, out.width, out.height);
  c.fillStyle = "#1b2230"; c.font = (13 * devicePixelRatio) + "px system-ui, sans-serif";
  c.fillText($("#chart-" + name).parentNode.querySelector("figcaption").firstChild.textContent.trim() +
    " — " + state.result.sentence.split(";")[0], 8 * devicePixelRatio, 18 * devicePixelRatio);
  c.drawImage(src, 0, pad2);
  out.toBlob(function (blob) { download("cronlab-" + name + ".png", blob); }, "image/png");
}

export function status(text) { $("#share-status").textContent = text; setTimeout(function () { $("#share-status").textContent = ""; }, 2500); }
