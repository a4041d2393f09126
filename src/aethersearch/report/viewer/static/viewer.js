/* aether view: the question list without page reloads. Plain JS, no library, nothing fetched but this server.
   The server renders every row and pager (the same templates as the first paint); this script only asks for
   them as JSON and keeps the URL equal to the view, so every state is a deep link. Each change of filter, sort
   or page is a history entry: the Back button undoes it (the form follows the URL), never leaves the viewer. */
(function () {
  "use strict";
  var form = document.getElementById("filters");
  if (!form) { return; }
  var rows = document.getElementById("rows");
  var pager = document.getElementById("pager");
  var pending = null;

  function paramsOf(form) {
    var params = new URLSearchParams();
    new FormData(form).forEach(function (value, key) { if (value !== "") { params.set(key, value); } });
    return params;
  }

  function showInForm(params) {
    Array.prototype.forEach.call(form.elements, function (field) {
      if (!field.name) { return; }
      var value = params.get(field.name);
      if (field.type === "checkbox") { field.checked = value === "true"; return; }
      if (value !== null) { field.value = value; return; }
      if (field.tagName === "SELECT" && field.options.length) { field.value = field.options[0].value; return; }
      field.value = field.dataset.default !== undefined ? field.dataset.default : "";
    });
  }

  function load(params, fromHistory) {
    if (pending) { pending.abort(); }
    pending = new AbortController();
    document.body.classList.add("loading");
    return fetch("/api/questions?" + params.toString(), { signal: pending.signal })
      .then(function (response) {
        if (!response.ok) { return response.text().then(function (t) { throw new Error(t); }); }
        return response.json();
      })
      .then(function (data) {
        rows.innerHTML = data.rows_html;
        pager.innerHTML = data.pager_html;
        document.querySelector("thead tr").innerHTML = data.head_html;
        document.getElementById("total").textContent = String(data.total);
        document.getElementById("page-no").textContent = String(data.page + 1);
        document.getElementById("pages").textContent = String(data.pages);
        form.elements.sort.value = data.query.sort;
        form.elements.desc.value = data.query.desc ? "true" : "false";
        var url = "/?" + params.toString();
        if (!fromHistory && url !== location.pathname + location.search) { history.pushState(null, "", url); }
        document.body.classList.remove("loading");
        document.body.setAttribute("data-updated", String(Date.now()));
      })
      .catch(function (error) {
        if (error.name === "AbortError") { return; }
        document.body.classList.remove("loading");
        rows.innerHTML = '<tr><td colspan="12" class="problem">Could not load the list: ' +
          String(error.message).replace(/</g, "&lt;").slice(0, 400) + "</td></tr>";
      });
  }

  function refresh() { var p = paramsOf(form); p.delete("page"); load(p); }

  form.addEventListener("change", refresh);
  form.addEventListener("submit", function (event) { event.preventDefault(); refresh(); });
  var timer = null;
  form.elements.q.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(refresh, 200); });

  window.addEventListener("popstate", function () {
    var params = new URLSearchParams(location.search);
    showInForm(params);
    load(params, true);
  });

  document.addEventListener("click", function (event) {
    var link = event.target.closest("a.sort, #pager a");
    if (!link) { return; }
    event.preventDefault();
    load(new URLSearchParams(link.getAttribute("href").replace(/^\?/, "")));
  });
})();
