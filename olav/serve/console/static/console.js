// olav console: the little JavaScript it has. Every page works without it.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // a filter's select submits its form at once (the form's button still works without this)
  for (const select of document.querySelectorAll("select[data-autosubmit]")) {
    select.addEventListener("change", () => select.form && select.form.requestSubmit());
  }
  // "/" focuses the search box, as on many data sites
  const search = document.querySelector("input[type=search]");
  document.addEventListener("keydown", (event) => {
    const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement.tagName);
    if (search && event.key === "/" && !typing) {
      event.preventDefault();
      search.focus();
    }
  });
  // a button that changes something is pressed once: a second click would send it twice
  for (const form of document.querySelectorAll("form[method=post]")) {
    form.addEventListener("submit", () => {
      for (const button of form.querySelectorAll("button")) button.disabled = true;
    });
  }
});
