/* Tap a figure to see it full size (issue 25). On a phone a 7-inch figure is shown at a third of
   its size; each chapter figure becomes a link to its own image file, which the browser opens at
   full resolution and lets the reader zoom. Images already inside a link, and the inline
   fallbacks of interactive figures (data: URIs, hidden once plotly draws), are left alone. */
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll(".bd-article .cell_output img, .bd-article figure img").forEach(function (img) {
    var src = img.getAttribute("src");
    if (!src || src.indexOf("data:") === 0 || img.closest("a") || img.closest(".ac-interactive")) return;
    var link = document.createElement("a");
    link.href = src;
    link.className = "figure-zoom";
    link.title = "Open the figure full size";
    img.parentNode.insertBefore(link, img);
    link.appendChild(img);
  });
});
