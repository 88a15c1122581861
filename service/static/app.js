// Talks to POST /correct and renders the result. Only textContent is used for user and model
// text, never innerHTML, so nothing typed into the page can inject markup.
"use strict";

const $ = (id) => document.getElementById(id);

// Positions from the server count Unicode code points; Array.from splits the same way
// (a JS string index would count UTF-16 units and drift after any emoji).
function renderOutput(result) {
  const output = $("output");
  output.replaceChildren();
  const changed = new Map(result.edits.map((e) => [e.position, e]));
  Array.from(result.target).forEach((ch, i) => {
    const edit = changed.get(i);
    if (!edit) {
      output.append(ch);
      return;
    }
    const mark = document.createElement("mark");
    mark.className = "changed";
    mark.textContent = ch;
    mark.title = `${edit.source} → ${edit.target} (${(edit.confidence * 100).toFixed(1)}%)`;
    mark.dataset.position = String(i);
    output.append(mark);
  });
}

function renderEdits(result) {
  const body = $("edits").querySelector("tbody");
  body.replaceChildren();
  for (const e of result.edits) {
    const row = document.createElement("tr");
    for (const value of [e.position, e.source, e.target, `${(e.confidence * 100).toFixed(1)}%`, e.kind]) {
      const cell = document.createElement("td");
      cell.textContent = String(value);
      row.append(cell);
    }
    body.append(row);
  }
  $("edits").hidden = result.edits.length === 0;
  $("no-edits").hidden = result.edits.length !== 0;
}

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = false;
}

async function correct(event) {
  event.preventDefault();
  const button = $("submit");
  const payload = { text: $("input").value };
  const threshold = $("threshold").value.trim();
  if (threshold !== "") payload.threshold = Number(threshold);
  $("error").hidden = true;
  button.disabled = true;
  $("status").textContent = "…";
  try {
    const response = await fetch("/correct", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(payload),
    });
    const data = await response.json().catch(() => ({}));
    if (!response.ok) {
      showError(`错误 / Error ${response.status}: ${data.detail || response.statusText}`);
      $("status").textContent = "";
      return;
    }
    renderOutput(data);
    renderEdits(data);
    $("result").hidden = false;
    $("status").textContent = `${data.edits.length} edit(s), ${data.elapsed_ms.toFixed(1)} ms`;
  } catch (err) {
    showError(`请求失败 / Request failed: ${err}`);
    $("status").textContent = "";
  } finally {
    button.disabled = false;
  }
}

$("form").addEventListener("submit", correct);
// Ctrl/Cmd+Enter submits from the textarea.
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("form").requestSubmit();
});
