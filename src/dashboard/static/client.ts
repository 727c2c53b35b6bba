/**
 * The dashboard's one script, served as /dashboard/static/dashboard.js. Every page works without
 * it; it only adds the live expiry countdown, new approval requests without a reload, the copy
 * button for a new API key, confirmation before revoking and focus on a form's error summary.
 *
 * A browser script, not a Node module: tsconfig.client.json type-checks it against the DOM and
 * emits it as one classic script (no imports or exports, so it runs from a plain `<script defer>`
 * under `script-src 'self'`); dashboard/assets.ts serves the emitted file.
 */

/** One approval card as /dashboard/approvals.json sends it (see pages/approvals.ts). */
type PendingApproval = { id: string; html: string };
type ApprovalsJson = { pendingCount: number; pending: PendingApproval[] };

(() => {
  const meta = document.querySelector('meta[name="server-now"]');
  // Countdowns use the server's clock: a laptop's clock may be minutes off.
  const skew = meta ? Number(meta.getAttribute('content')) - Date.now() : 0;
  const now = (): number => Date.now() + skew;

  const pad = (n: number): string => (n < 10 ? `0${n}` : String(n));
  function left(ms: number): string {
    const s = Math.floor(ms / 1000);
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    return h > 0 ? `${h} h ${pad(m)} min` : `${m}:${pad(s % 60)}`;
  }

  function tick(): void {
    for (const el of Array.from(document.querySelectorAll<HTMLElement>('[data-expires-at]'))) {
      const ms = Number(el.getAttribute('data-expires-at')) - now();
      if (ms <= 0) {
        el.textContent = 'expired';
        el.classList.add('is-expired');
      } else {
        el.textContent = `expires in ${left(ms)}`;
      }
    }
  }
  tick();
  setInterval(tick, 1000);

  // A form came back with errors: start at their summary (layout.ts errorSummary), not at the top.
  document.querySelector<HTMLElement>('[data-error-summary]')?.focus();

  const list = document.querySelector<HTMLElement>('[data-live-approvals]');
  const empty = document.querySelector<HTMLElement>('[data-approvals-empty]');
  const badge = document.querySelector<HTMLElement>('[data-pending-count]');
  const status = document.querySelector<HTMLElement>('[data-live-status]');
  let polling: ReturnType<typeof setInterval> | undefined;

  function merge(into: HTMLElement, items: PendingApproval[]): void {
    const wanted = new Set<string>();
    let added = 0;
    for (let i = items.length - 1; i >= 0; i--) {
      const item = items[i]!;
      wanted.add(item.id);
      if (into.querySelector(`[data-approval-id="${item.id}"]`)) continue;
      const t = document.createElement('template');
      t.innerHTML = item.html;
      const node = t.content.firstElementChild;
      if (!node) continue;
      node.classList.add('is-new');
      into.insertBefore(node, into.firstChild);
      added++;
    }
    for (const card of Array.from(into.querySelectorAll('[data-approval-id]'))) {
      // Decided elsewhere or expired; a card the user is typing in stays until they submit.
      if (!wanted.has(card.getAttribute('data-approval-id') ?? '') && !card.contains(document.activeElement)) card.remove();
    }
    if (empty) empty.hidden = into.querySelector('[data-approval-id]') !== null;
    if (added > 0 && status) status.textContent = added === 1 ? 'A new approval request arrived.' : `${added} new approval requests arrived.`;
    tick();
  }

  function poll(): void {
    fetch('/dashboard/approvals.json', { credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } })
      .then((r): Promise<ApprovalsJson> | null => {
        if (r.status === 401 || r.status === 403) {
          clearInterval(polling);
          return null;
        }
        return r.ok ? (r.json() as Promise<ApprovalsJson>) : null;
      })
      .then((data) => {
        if (!data) return;
        if (badge) {
          badge.textContent = String(data.pendingCount);
          badge.hidden = data.pendingCount === 0;
        }
        if (list) merge(list, data.pending);
      })
      .catch(() => {
        // offline for a moment: the next poll tries again
      });
  }
  if (list || badge) polling = setInterval(poll, 2500);

  document.addEventListener('click', (e) => {
    const button = e.target instanceof Element ? e.target.closest<HTMLElement>('[data-copy]') : null;
    if (!button) return;
    const input = document.getElementById(button.getAttribute('data-copy') ?? '');
    if (!(input instanceof HTMLInputElement)) return;
    const done = () => {
      button.textContent = 'Copied';
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(input.value).then(done, () => input.select());
    } else {
      input.select();
      // The deprecated fallback for plain-HTTP pages, where the Clipboard API is unavailable.
      if (document.execCommand('copy')) done();
    }
  });

  document.addEventListener('submit', (e) => {
    const form = e.target;
    const question = form instanceof HTMLFormElement ? form.getAttribute('data-confirm') : null;
    if (question && !window.confirm(question)) e.preventDefault();
  }, true);
})();
