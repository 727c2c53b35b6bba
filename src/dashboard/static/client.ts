/**
 * The dashboard's one script, served as /dashboard/static/dashboard.js. Every page works without
 * it; it only adds the live expiry countdown, new approval requests without a reload, the copy
 * button for a new API key and confirmation before revoking. Kept in a module (not a .js file) so
 * `tsc` alone builds what the server serves. Plain ES2017, no template literals inside.
 */
export const clientScript = String.raw`(function () {
  'use strict';

  var meta = document.querySelector('meta[name="server-now"]');
  // Countdowns use the server's clock: a laptop's clock may be minutes off.
  var skew = meta ? Number(meta.getAttribute('content')) - Date.now() : 0;
  function now() { return Date.now() + skew; }

  function pad(n) { return n < 10 ? '0' + n : String(n); }
  function left(ms) {
    var s = Math.floor(ms / 1000);
    var h = Math.floor(s / 3600);
    var m = Math.floor((s % 3600) / 60);
    return h > 0 ? h + ' h ' + pad(m) + ' min' : m + ':' + pad(s % 60);
  }

  function tick() {
    var els = document.querySelectorAll('[data-expires-at]');
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      var ms = Number(el.getAttribute('data-expires-at')) - now();
      if (ms <= 0) {
        el.textContent = 'expired';
        el.classList.add('is-expired');
      } else {
        el.textContent = 'expires in ' + left(ms);
      }
    }
  }
  tick();
  setInterval(tick, 1000);

  var list = document.querySelector('[data-live-approvals]');
  var empty = document.querySelector('[data-approvals-empty]');
  var badge = document.querySelector('[data-pending-count]');
  var status = document.querySelector('[data-live-status]');
  var polling = null;

  function merge(items) {
    var wanted = {};
    var added = 0;
    for (var i = items.length - 1; i >= 0; i--) {
      var item = items[i];
      wanted[item.id] = true;
      if (list.querySelector('[data-approval-id="' + item.id + '"]')) continue;
      var t = document.createElement('template');
      t.innerHTML = item.html;
      var node = t.content.firstElementChild;
      if (!node) continue;
      node.classList.add('is-new');
      list.insertBefore(node, list.firstChild);
      added++;
    }
    var shown = list.querySelectorAll('[data-approval-id]');
    for (var j = 0; j < shown.length; j++) {
      var card = shown[j];
      // Decided elsewhere or expired; a card the user is typing in stays until they submit.
      if (!wanted[card.getAttribute('data-approval-id')] && !card.contains(document.activeElement)) card.remove();
    }
    if (empty) empty.hidden = list.querySelector('[data-approval-id]') !== null;
    if (added > 0 && status) status.textContent = added === 1 ? 'A new approval request arrived.' : added + ' new approval requests arrived.';
    tick();
  }

  function poll() {
    fetch('/dashboard/approvals.json', { credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } })
      .then(function (r) {
        if (r.status === 401 || r.status === 403) { clearInterval(polling); return null; }
        return r.ok ? r.json() : null;
      })
      .then(function (data) {
        if (!data) return;
        if (badge) {
          badge.textContent = String(data.pendingCount);
          badge.hidden = data.pendingCount === 0;
        }
        if (list) merge(data.pending);
      })
      .catch(function () { /* offline for a moment: the next poll tries again */ });
  }
  if (list || badge) polling = setInterval(poll, 2500);

  document.addEventListener('click', function (e) {
    var button = e.target.closest ? e.target.closest('[data-copy]') : null;
    if (!button) return;
    var input = document.getElementById(button.getAttribute('data-copy'));
    if (!input) return;
    function done() { button.textContent = 'Copied'; }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(input.value).then(done, function () { input.select(); });
    } else {
      input.select();
      if (document.execCommand && document.execCommand('copy')) done();
    }
  });

  document.addEventListener('submit', function (e) {
    var form = e.target;
    var question = form.getAttribute('data-confirm');
    if (question && !window.confirm(question)) e.preventDefault();
  }, true);
})();
`;
