// The dashboard's only script (served from /assets, allowed by script-src 'self'): copy buttons and the account switcher.
// Pages work without it; it only adds the one-click copy of a new key or a request id.
document.addEventListener('click', (event) => {
  const button = event.target instanceof Element ? event.target.closest('button[data-copy]') : null;
  if (button === null) return;
  const source = document.getElementById(button.getAttribute('data-copy') ?? '');
  if (source === null) return;
  navigator.clipboard.writeText(source.textContent ?? '').then(
    () => {
      button.textContent = 'Copied';
    },
    () => {
      button.textContent = 'Select and copy';
    },
  );
});

// The account switcher changes account as soon as one is chosen (its Switch button serves without script).
document.addEventListener('change', (event) => {
  const select = event.target instanceof HTMLSelectElement && event.target.hasAttribute('data-autosubmit') ? event.target : null;
  if (select !== null && select.form !== null) select.form.requestSubmit();
});
