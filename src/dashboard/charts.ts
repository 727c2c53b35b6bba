import { usd } from './format.js';
import { html, trusted, type Html } from './html.js';

/**
 * Spend charts as inline SVG, and limit meters, drawn on the server so they need no script.
 * Amounts become Numbers only to place pixels (exact up to $9 billion); every figure printed comes
 * from usd(). The cap's amount is written in the chart's caption (capLegend), not on its dashed
 * line, where it would collide with the bars' labels.
 */

function px(n: number): string {
  return (Math.round(n * 10) / 10).toString();
}

function scale(values: readonly bigint[], cap: bigint): number {
  const max = values.reduce((a, b) => (b > a ? b : a), cap);
  // 10% headroom so a bar at the cap does not touch the top; 1 micro-USD avoids dividing by zero.
  return Number(max > 0n ? max : 1n) * 1.1;
}

/** A meter's values as decimal text of exact amounts: used of max, amber from `low`, red from `high`. */
export type MeterValues = { used: string; max: string; low: string; high: string };

/**
 * How much of a limit is used, as a native `<meter>` (no script, no SVG). The values are only
 * placed, never computed with; `labelledBy` names the elements whose text states the numbers.
 */
export function usageMeter(id: string, v: MeterValues, labelledBy: string): Html {
  return html`<meter id="${id}" min="0" max="${v.max}" low="${v.low}" high="${v.high}" optimum="0" value="${v.used}" aria-labelledby="${labelledBy}"></meter>`;
}

/**
 * The running total over the last 24 hours (hourly steps, oldest first) against the cap: where the
 * line meets the dashed cap line, the next payment is refused.
 */
export function cumulativeChart(hourly: readonly bigint[], cap: bigint, label: string): Html {
  const W = 320, H = 130, left = 4, right = 4, top = 18, bottom = 18;
  const running: bigint[] = [];
  let total = 0n;
  for (const v of hourly) running.push((total += v));
  const max = scale(running, cap);
  const x = (i: number) => left + ((W - left - right) * i) / hourly.length;
  const y = (v: bigint) => top + (H - top - bottom) * (1 - Number(v) / max);
  let d = `M${px(x(0))},${px(y(0n))}`;
  running.forEach((v, i) => (d += ` L${px(x(i + 1))},${px(y(i === 0 ? 0n : running[i - 1]!))} L${px(x(i + 1))},${px(y(v))}`));
  const area = `${d} L${px(x(hourly.length))},${px(y(0n))} Z`;
  const capY = px(y(cap));
  return html`<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="${label}">
<title>${label}</title>
<line class="axis" x1="${left}" y1="${px(y(0n))}" x2="${W - right}" y2="${px(y(0n))}"></line>
${cap > 0n && html`<line class="cap" x1="${left}" y1="${capY}" x2="${W - right}" y2="${capY}"></line>`}
<path class="area" d="${trusted(area)}"></path>
<path class="line" d="${trusted(d)}"></path>
<text x="${left}" y="${H - 4}">24 h ago</text>
<text x="${W - right}" y="${H - 4}" text-anchor="end">now</text>
</svg>`;
}

/** The caption's key to the dashed cap line. */
export function capLegend(text: string): Html {
  return html`<span class="legend-cap" aria-hidden="true"></span>${text}`;
}

/** Height of a bar's value label above its baseline, and below it, in SVG units (10px text). */
const LABEL_ASCENT = 10, LABEL_DESCENT = 3;

/**
 * Seven rolling days as bars against the 24-hour cap; a day above the cap is drawn in red. A bar's
 * value label that the cap line would strike through moves to just above the line.
 */
export function dailyChart(daily: readonly bigint[], cap: bigint, label: string, size: { width: number; height: number } = { width: 320, height: 130 }): Html {
  const W = size.width, H = size.height, left = 4, right = 4, top = 18, bottom = 18;
  const max = scale(daily, cap);
  const slot = (W - left - right) / daily.length;
  const y = (v: bigint) => top + (H - top - bottom) * (1 - Number(v) / max);
  const base = y(0n);
  const capLine = cap > 0n ? y(cap) : undefined;
  const labelAt = (barTop: number) => {
    const baseline = barTop - 3;
    const struck = capLine !== undefined && capLine > baseline - LABEL_ASCENT - 1 && capLine < baseline + LABEL_DESCENT + 1;
    return struck ? capLine - LABEL_DESCENT - 2 : baseline;
  };
  const bars = daily.map((v, i) => {
    const h = base - y(v);
    const title = `${daily.length - i === 1 ? 'last 24 h' : `${daily.length - i} days ago`}: ${usd(v)}`;
    const barH = Math.max(h, v > 0n ? 1 : 0);
    const value = v > 0n ? html`<text class="value" x="${px(left + i * slot + slot / 2)}" y="${px(labelAt(base - barH))}" text-anchor="middle">${usd(v)}</text>` : '';
    return html`<rect class="${cap > 0n && v > cap ? 'bar-over' : 'bar'}" x="${px(left + i * slot + slot * 0.15)}" y="${px(base - barH)}" width="${px(slot * 0.7)}" height="${px(barH)}"><title>${title}</title></rect>${value}`;
  });
  const capY = px(y(cap));
  return html`<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="${label}">
<title>${label}</title>
<line class="axis" x1="${left}" y1="${px(base)}" x2="${W - right}" y2="${px(base)}"></line>
${bars}
${cap > 0n && html`<line class="cap" x1="${left}" y1="${capY}" x2="${W - right}" y2="${capY}"></line>`}
<text x="${left}" y="${H - 4}">7 days ago</text>
<text x="${W - right}" y="${H - 4}" text-anchor="end">today</text>
</svg>`;
}
