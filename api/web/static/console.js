// The console's only script: copy buttons next to full hashes, addresses and ids.
// Everything else is plain HTML and forms.
document.addEventListener("click", function (event) {
  var button = event.target.closest("button.copy");
  if (!button) return;
  var text = button.getAttribute("data-copy");
  var done = function () {
    button.textContent = "copied";
    setTimeout(function () { button.textContent = "copy"; }, 1500);
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done);
  } else {
    var area = document.createElement("textarea");
    area.value = text;
    document.body.appendChild(area);
    area.select();
    document.execCommand("copy");
    area.remove();
    done();
  }
});
