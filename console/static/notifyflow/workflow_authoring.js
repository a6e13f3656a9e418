/* The workflow editor checks as you type (console/workflow_authoring.py): ~400 ms after
   the last keystroke the definition's text is posted to the check endpoint, its problems
   are listed under the editor (node and field named) and the diagram is redrawn from the
   unsaved text when it is valid. Without JavaScript the page works as before: the save
   shows the same problems. */
(function () {
  "use strict";
  var script = document.getElementById("nf-authoring-script");
  var editor = document.getElementById("id_definition");
  if (!script || !editor) return;
  var checkUrl = script.getAttribute("data-check-url");
  var csrf = document.querySelector("[name=csrfmiddlewaretoken]");

  var panel = document.createElement("div");
  panel.id = "nf-authoring";
  panel.className = "nf-authoring";
  panel.setAttribute("aria-live", "polite");
  var status = document.createElement("p");
  status.id = "nf-check-status";
  var list = document.createElement("ul");
  list.id = "nf-problems";
  panel.appendChild(status);
  panel.appendChild(list);
  editor.insertAdjacentElement("afterend", panel);

  // The page's drawing (an existing workflow), else one made under the problems.
  var drawing = document.querySelector(".field-drawing .readonly");
  if (!drawing) {
    drawing = document.createElement("div");
    drawing.id = "nf-live-drawing";
    panel.appendChild(drawing);
  }
  // Inside the drawing's box, above the svg (the box is a flex item of its row).
  var caption = document.createElement("p");
  caption.className = "nf-drawing-caption";

  function where(problem) {
    if (problem.node) return "Node \u201c" + problem.node + "\u201d, field " + problem.field;
    return "Field " + problem.field;
  }

  function show(result) {
    list.textContent = "";
    if (result.ok) {
      status.textContent = "No problems: the definition is valid (not saved yet).";
      status.className = "nf-check-ok";
      drawing.innerHTML = result.svg; // server-made, every text escaped (console/drawing.py)
      caption.textContent = "Drawn from the definition being edited (unsaved).";
      drawing.insertBefore(caption, drawing.firstChild);
      return;
    }
    var n = result.problems.length;
    status.textContent = n + (n === 1 ? " problem" : " problems") + " (saving would fail):";
    status.className = "nf-check-problems";
    result.problems.forEach(function (problem) {
      var item = document.createElement("li");
      item.className = "nf-problem";
      item.setAttribute("data-node", problem.node || "");
      item.setAttribute("data-field", problem.field);
      item.title = problem.code;
      item.textContent = where(problem) + ": " + problem.message;
      list.appendChild(item);
    });
    if (caption.parentNode) caption.textContent = "The last valid drawing (the text now has problems).";
  }

  var timer = null;
  var sent = 0;
  function check() {
    var mine = ++sent;
    fetch(checkUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf ? csrf.value : "" },
      body: JSON.stringify({ definition: editor.value })
    })
      .then(function (response) { return response.json(); })
      .then(function (result) { if (mine === sent && result.problems) show(result); })
      .catch(function () {
        if (mine === sent) status.textContent = "Could not check the definition (will retry on the next edit).";
      });
  }
  editor.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(check, 400);
  });
})();
