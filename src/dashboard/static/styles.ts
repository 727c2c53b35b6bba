/**
 * The dashboard's one stylesheet, served as /dashboard/static/dashboard.css. It lives in a module
 * rather than a .css file so `tsc` alone builds everything the server serves (no copy step).
 */
export const styles = String.raw`
:root {
  --text: #1b1f24; --muted: #57606a; --line: #d0d7de; --soft: #f6f8fa; --bg: #ffffff;
  --accent: #0b5cad; --accent-dark: #084a8c; --ok: #1a7f37; --ok-soft: #dafbe1;
  --bad: #b42318; --bad-soft: #ffebe9; --warn: #7d4e00; --warn-soft: #fff8c5; --focus: #0b5cad; --focus-on-dark: #fbbf24;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  font-size: 15px; line-height: 1.5; color: var(--text); background: var(--soft);
}
* { box-sizing: border-box; }
body { margin: 0; }
a { color: var(--accent); }
a:hover { color: var(--accent-dark); }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.topbar :focus-visible { outline-color: var(--focus-on-dark); }
/* A focused table region keeps its ring inside the box, where nothing clips it. */
.table-wrap:focus-visible { outline-offset: -3px; }
h1 { font-size: 1.5rem; margin: 0 0 .75rem; }
h2 { font-size: 1.15rem; margin: 1.75rem 0 .75rem; }
h3 { font-size: 1rem; margin: 0 0 .5rem; }
p { margin: .25rem 0 .75rem; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .88em; }
.muted { color: var(--muted); }
.small { font-size: .85rem; }
.sr-only { position: absolute; width: 1px; height: 1px; margin: -1px; padding: 0; border: 0; overflow: hidden; clip: rect(0 0 0 0); clip-path: inset(50%); white-space: nowrap; }
.skip-link { position: absolute; left: -999px; top: 0; background: var(--bg); padding: .5rem 1rem; z-index: 10; }
.skip-link:focus { left: 1rem; }

.topbar { background: #111827; color: #f9fafb; }
.topbar-inner { max-width: 1180px; margin: 0 auto; padding: 0 1.25rem; display: flex; align-items: center; gap: 1.5rem; min-height: 3.25rem; flex-wrap: wrap; }
.brand { font-weight: 700; letter-spacing: .01em; color: #fff; text-decoration: none; }
.brand span { color: #9ca3af; font-weight: 400; margin-left: .4rem; }
.nav { display: flex; gap: .25rem; flex-wrap: wrap; flex: 1; }
.nav a { color: #d1d5db; text-decoration: none; padding: .35rem .65rem; border-radius: 6px; }
.nav a:hover { color: #fff; background: #1f2937; }
.nav a[aria-current="page"] { color: #fff; background: #374151; }
.nav .count { display: inline-block; min-width: 1.4rem; padding: 0 .35rem; margin-left: .3rem; border-radius: 999px; background: #dc2626; color: #fff; font-size: .78rem; text-align: center; }
.nav .count[hidden] { display: none; }
.who { display: flex; align-items: center; gap: .75rem; font-size: .88rem; color: #d1d5db; }
.who form { margin: 0; }
.who button { background: transparent; color: #f9fafb; border-color: #4b5563; }
.who button:hover { background: #1f2937; }
@media (max-width: 760px) {
  /* The brand and sign-out on one row, the sections packed below: the header stays around a
     quarter of a laptop's first screen at 200% zoom, and smaller on a phone. */
  .topbar-inner { padding: .35rem .75rem; gap: .25rem .75rem; min-height: 0; }
  .brand { order: 1; }
  .who { order: 2; margin-left: auto; gap: .5rem; }
  .who .who-email { display: none; }
  .who button { padding: .2rem .6rem; }
  .nav { order: 3; flex: 1 0 100%; gap: 0; margin: 0 -.5rem; }
  .nav a { white-space: nowrap; padding: .2rem .5rem; }
  main { padding: 1rem .75rem 2rem; }
}

main { max-width: 1180px; margin: 0 auto; padding: 1.5rem 1.25rem 3rem; }
.page-head { display: flex; align-items: baseline; justify-content: space-between; gap: 1rem; flex-wrap: wrap; }
.panel { background: var(--bg); border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.25rem; margin-bottom: 1rem; }
.panel > h2:first-child { margin-top: 0; }

.flash { border-radius: 8px; padding: .75rem 1rem; margin-bottom: 1rem; border: 1px solid; }
.flash-ok { background: var(--ok-soft); border-color: #8ddb9c; }
.flash-error { background: var(--bad-soft); border-color: #f5b5ae; }
.secret { display: flex; gap: .5rem; align-items: center; margin-top: .5rem; flex-wrap: wrap; }
.secret input { flex: 1; min-width: 22rem; font-family: ui-monospace, Menlo, Consolas, monospace; }

table { width: 100%; border-collapse: collapse; background: var(--bg); }
.table-wrap { position: relative; overflow-x: auto; border: 1px solid var(--line); border-radius: 8px; background: var(--bg); margin-bottom: 1rem; }
th, td { text-align: left; padding: .5rem .75rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: .8rem; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); background: var(--soft); white-space: nowrap; }
tbody tr:last-child td { border-bottom: 0; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.actions { white-space: nowrap; }
.actions form { display: inline; }
.clip { max-width: 22rem; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.nowrap { white-space: nowrap; }
td.wrap { min-width: 16rem; overflow-wrap: anywhere; }

/* The ledger fits its box at laptop widths without scrolling: time, type, status and amount keep
   one line each; the agent column has a set width and its names wrap at spaces and hyphens (a
   single word longer than the column breaks anywhere); the on-chain state sits under the status
   and the service under the address; the reason takes the rest, wrapping at word boundaries (only
   a token longer than a line, such as a hex address, breaks inside). On a phone each row is a card
   (agent and amount, then status and time, then recipient and type, then the reason) so nothing
   hides off to the right. The header row stays for screen readers. */
.ledger th, .ledger td { padding-left: .5rem; padding-right: .5rem; }
.ledger .c-agent { width: 12rem; overflow-wrap: anywhere; }
.ledger .chain, .ledger .service { font-size: .85rem; margin-top: .2rem; }
.ledger .service { overflow-wrap: anywhere; }
@media (max-width: 760px) {
  .ledger-wrap { overflow-x: visible; border: 0; background: none; }
  .ledger thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
  .ledger, .ledger tbody { display: block; background: none; }
  .ledger tr { display: grid; grid-template-columns: minmax(0, 1fr) auto; grid-template-areas: "agent amount" "status time" "recipient type" "reason reason"; gap: .15rem .75rem; background: var(--bg); border: 1px solid var(--line); border-radius: 8px; padding: .6rem .8rem; margin-bottom: .5rem; }
  .ledger td { display: block; padding: 0; border: 0; min-width: 0; }
  .ledger .c-time { grid-area: time; text-align: right; }
  .ledger .c-agent { grid-area: agent; width: auto; font-weight: 600; }
  .ledger .c-type { grid-area: type; text-align: right; }
  .ledger .c-status { grid-area: status; }
  .ledger .c-amount { grid-area: amount; font-weight: 600; }
  .ledger .c-recipient { grid-area: recipient; }
  .ledger .c-reason { grid-area: reason; min-width: 0; }
  .ledger .c-time, .ledger .c-type, .ledger .c-recipient { color: var(--muted); font-size: .85rem; }
}

.badge { display: inline-block; padding: .05rem .5rem; border-radius: 999px; font-size: .8rem; font-weight: 600; border: 1px solid transparent; white-space: nowrap; }
.badge-ok { background: var(--ok-soft); color: var(--ok); border-color: #a6e3b4; }
.badge-bad { background: var(--bad-soft); color: var(--bad); border-color: #f5b5ae; }
.badge-warn { background: var(--warn-soft); color: var(--warn); border-color: #eed888; }
.badge-muted { background: var(--soft); color: var(--muted); border-color: var(--line); }

label { display: block; font-weight: 600; font-size: .9rem; margin-bottom: .25rem; }
.hint { font-weight: 400; color: var(--muted); font-size: .85rem; }
input[type="text"], input[type="email"], input[type="password"], input[type="date"], input[type="url"], select, textarea {
  font: inherit; width: 100%; padding: .45rem .6rem; border: 1px solid #8c959f; border-radius: 6px; background: var(--bg); color: var(--text);
}
textarea { min-height: 6rem; font-family: ui-monospace, Menlo, Consolas, monospace; font-size: .88rem; }
input[aria-invalid="true"], textarea[aria-invalid="true"] { border-color: var(--bad); box-shadow: 0 0 0 1px var(--bad); }
.field { margin-bottom: .9rem; }
.field-error { color: var(--bad); font-size: .88rem; margin: .25rem 0 0; font-weight: 600; }
.error-summary { border: 2px solid var(--bad); border-radius: 8px; background: var(--bg); padding: .75rem 1rem; margin-bottom: 1rem; }
.error-summary h2 { margin: 0 0 .35rem; font-size: 1rem; color: var(--bad); }
.error-summary ul { margin: 0; padding-left: 1.25rem; }
.error-summary a { color: var(--bad); font-weight: 600; }
.form-grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(14rem, 1fr)); gap: 0 1rem; }
.inline-form { display: flex; gap: .75rem; align-items: flex-end; flex-wrap: wrap; }
.inline-form .field { margin-bottom: 0; flex: 1; min-width: 12rem; }
.filters { display: grid; grid-template-columns: repeat(auto-fit, minmax(10rem, 1fr)); gap: .75rem; align-items: end; }
.filters .field { margin: 0; }
.field.check { display: flex; gap: .4rem; align-items: center; align-self: center; }
.field.check label { margin: 0; }
.field.check input { width: 1.1rem; height: 1.1rem; margin: 0; }
/* Window limits as form rows: one fieldset per limit, its fields side by side where they fit. */
fieldset { min-width: 0; }
.limits-editor { border: 0; padding: 0; margin: 0 0 1rem; }
.limits-editor > legend { font-weight: 600; font-size: 1rem; padding: 0; margin-bottom: .25rem; }
.limit-row { border: 1px solid var(--line); border-radius: 8px; padding: .5rem .9rem .1rem; margin: 0 0 .75rem; }
.limit-row legend { font-weight: 600; font-size: .9rem; padding: 0 .3rem; }
.limit-fields { display: grid; grid-template-columns: repeat(auto-fill, minmax(9.5rem, 1fr)); gap: 0 .9rem; align-items: start; }
.limit-fields .field.check { align-self: end; margin-bottom: 1.3rem; }
.limit-rows + button, .limit-rows + p { margin-bottom: 1rem; }
.limit-rows:focus { outline: none; }

button, .button { font: inherit; font-weight: 600; padding: .42rem .9rem; border-radius: 6px; border: 1px solid #8c959f; background: var(--bg); color: var(--text); cursor: pointer; text-decoration: none; display: inline-block; line-height: 1.4; }
button:hover, .button:hover { background: var(--soft); }
.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
.primary:hover { background: var(--accent-dark); }
.approve { background: var(--ok); border-color: var(--ok); color: #fff; }
.approve:hover { background: #116329; }
.danger { color: var(--bad); border-color: #e5a39c; }
.danger:hover { background: var(--bad-soft); }
.link-button { border: 0; background: none; padding: 0; color: var(--accent); text-decoration: underline; font-weight: 400; }

.approvals { display: grid; gap: .75rem; }
.approval { background: var(--bg); border: 1px solid var(--line); border-left: 4px solid #d97706; border-radius: 8px; padding: 1rem 1.25rem; display: grid; grid-template-columns: minmax(0, 1fr) minmax(16rem, 22rem); gap: 1rem 1.5rem; }
.approval.is-new { animation: arrive 1.5s ease-out; }
@keyframes arrive { from { background: #fff7d6; } to { background: var(--bg); } }
.approval .amount { font-size: 1.6rem; font-weight: 700; font-variant-numeric: tabular-nums; line-height: 1.2; }
.approval dl { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: .2rem .9rem; margin: .5rem 0 0; }
.approval dt { color: var(--muted); font-size: .88rem; }
.approval dd { margin: 0; overflow-wrap: anywhere; }
.approval .payees { margin: 0; padding-left: 1.1rem; }
.approval .decide { display: grid; gap: .5rem; align-content: start; }
.approval .decide .buttons { display: flex; gap: .5rem; }
/* A form's hidden first submit button, which takes Enter in a field: inert in a decision (see
   pages/approvals.ts), Save in a form whose "Add a limit row" button comes before its own Save. */
.implicit-submit { display: none; }
.countdown { font-weight: 600; color: var(--warn); }
.countdown.is-expired { color: var(--bad); }
.empty { padding: 1.25rem; text-align: center; color: var(--muted); background: var(--bg); border: 1px dashed var(--line); border-radius: 8px; }
@media (max-width: 760px) { .approval { grid-template-columns: 1fr; } }
/* Recent decisions: a table on wider screens; on a phone one card per decision (agent and amount,
   outcome and time, the full recipient address, who decided, the note) so the recipient is never
   off to the right. Labels that the table's header gives are written out on the cards. */
.decided .addr-full, .decided .card-label { display: none; }
@media (max-width: 760px) {
  .decided-wrap { overflow-x: visible; border: 0; background: none; }
  .decided thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
  .decided, .decided tbody { display: block; background: none; }
  .decided tr { display: grid; grid-template-columns: minmax(0, 1fr) auto; grid-template-areas: "agent amount" "outcome when" "recipient recipient" "by by" "note note"; gap: .15rem .75rem; background: var(--bg); border: 1px solid var(--line); border-radius: 8px; padding: .6rem .8rem; margin-bottom: .5rem; }
  .decided td { display: block; padding: 0; border: 0; min-width: 0; }
  .decided .d-outcome { grid-area: outcome; }
  .decided .d-agent { grid-area: agent; font-weight: 600; white-space: normal; overflow-wrap: anywhere; }
  .decided .d-amount { grid-area: amount; font-weight: 600; }
  .decided .d-recipient { grid-area: recipient; white-space: normal; }
  .decided .d-by { grid-area: by; overflow-wrap: anywhere; }
  .decided .d-when { grid-area: when; text-align: right; color: var(--muted); font-size: .85rem; }
  .decided .d-note { grid-area: note; }
  .decided .d-note:empty { display: none; }
  .decided .addr-short { display: none; }
  .decided .addr-full { display: inline; overflow-wrap: anywhere; font-size: .8rem; }
  .decided .card-label { display: inline; color: var(--muted); }
}

.stats { display: grid; grid-template-columns: repeat(auto-fit, minmax(12rem, 1fr)); gap: .75rem; margin-bottom: 1rem; }
.stat { background: var(--bg); border: 1px solid var(--line); border-radius: 8px; padding: .75rem 1rem; }
.stat .value { font-size: 1.4rem; font-weight: 700; font-variant-numeric: tabular-nums; }
.stat .label { color: var(--muted); font-size: .85rem; }
.spend-agent { display: grid; grid-template-columns: minmax(10rem, 14rem) minmax(0, 1fr) minmax(0, 1fr); gap: 1rem 1.5rem; align-items: start; }
.spend-agent + .spend-agent { border-top: 1px solid var(--line); padding-top: 1rem; margin-top: 1rem; }
@media (max-width: 860px) { .spend-agent { grid-template-columns: 1fr; } }
/* Each limit of an agent as meters under its charts, in as many columns as fit. */
.limit-use { grid-column: 1 / -1; list-style: none; margin: 0; padding: 0; display: grid; grid-template-columns: repeat(auto-fill, minmax(16rem, 1fr)); gap: .5rem 1.5rem; }
.limit-use .limit-title { font-size: .85rem; font-weight: 600; margin: 0 0 .15rem; }
.meter-line { display: grid; gap: 0; font-size: .85rem; font-variant-numeric: tabular-nums; margin-bottom: .2rem; }
.meter-line meter { width: 100%; max-width: 16rem; height: 1rem; }
.chart { width: 100%; height: auto; display: block; }
.org-chart { margin: 0; }
/* The organization chart is drawn twice, wide and narrow, so its text keeps its size. */
.org-chart .chart-narrow { display: none; }
@media (max-width: 700px) { .org-chart .chart-wide { display: none; } .org-chart .chart-narrow { display: block; } }
.legend-cap { display: inline-block; width: 1.4rem; height: 0; border-top: 2px dashed #b42318; vertical-align: middle; margin: 0 .3rem 0 .5rem; }
figure { margin: 0; }
.chart-caption { font-size: .82rem; color: var(--muted); margin: .15rem 0 .35rem; }
.chart .axis { stroke: #8c959f; stroke-width: 1; }
.chart .grid { stroke: #e5e7eb; stroke-width: 1; }
.chart .cap { stroke: #b42318; stroke-width: 1.5; stroke-dasharray: 5 4; }
.chart .bar { fill: #0b5cad; }
.chart .bar-over { fill: #b42318; }
.chart .line { fill: none; stroke: #0b5cad; stroke-width: 2; }
.chart .area { fill: #0b5cad; opacity: .12; }
.chart text { font-size: 11px; fill: #57606a; font-family: system-ui, sans-serif; }
.chart text.value { font-size: 10px; fill: #1b1f24; font-variant-numeric: tabular-nums; }
.chart .track { fill: #e5e7eb; }
.chart .fill { fill: #0b5cad; }
.chart .fill-over { fill: #b42318; }

.pager { display: flex; gap: 1rem; justify-content: flex-end; margin-top: .75rem; }
.signin { max-width: 24rem; margin: 4rem auto; }
.signin h1 { text-align: center; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1rem; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.history { list-style: none; margin: 0; padding: 0; }
.history > li + li { border-top: 1px solid var(--line); padding-top: .6rem; margin-top: .6rem; }
.history h3 { margin: 0; }
.history p { margin: 0 0 .25rem; }
.history .changes { margin: 0; padding-left: 1.25rem; overflow-wrap: anywhere; }
`;
