// A click on a matrix cell opens its detail beside the matrix (one listener for ~8,000 cells).
document.addEventListener("click", function (event) {
  const cell = event.target.closest(".cov-matrix td");
  if (!cell || cell.classList.contains("s-none")) return;
  const table = cell.closest("table");
  const row = cell.parentElement;
  const dtype = table.querySelectorAll("thead tr.dtypes th")[cell.cellIndex].dataset.dtype;
  const query = new URLSearchParams({ op: row.dataset.op, variant: row.dataset.variant, dtype: dtype });
  table.querySelectorAll("td.sel").forEach(function (old) { old.classList.remove("sel"); });
  cell.classList.add("sel");
  htmx.ajax("GET", table.dataset.cellUrl + "?" + query.toString(), { target: "#cell-detail", swap: "innerHTML" });
});
