/**
 * Counters and histograms for the metrics observed on every request, kept as plain numbers and
 * written in the Prometheus text format (0.0.4) only when scraped. prom-client checks the label
 * names, sorts and hashes the labels and builds an object on every observation, even through a
 * child from `labels()`: under the quote load its request histogram and counter cost ~8 µs of
 * the event loop per request (an A/B within one process, docs/performance.md), against a map lookup and
 * a bucket search here. The label values are the caller's, each from a closed set in the source.
 */

type Series = { labels: readonly string[]; count: number };
type HistogramSeries = Series & { sum: number; buckets: number[] };

/** The label values of one series, as one map key (no label value contains NUL). */
const keyOf = (values: readonly string[]): string => (values.length === 1 ? values[0]! : values.join('\u0000'));

/** `\`, `"` and newlines escaped, as the text format wants label values. */
function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

/** The label set in braces; a bucket's `le` first, where prom-client wrote it. */
function labelText(names: readonly string[], values: readonly string[], le?: string): string {
  const parts = names.map((n, i) => `${n}="${escapeLabel(values[i]!)}"`);
  if (le !== undefined) parts.unshift(le);
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

/** A number as the text format writes it. */
function num(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

export type CounterTally = { inc: (...labels: string[]) => void; render: () => string };

export function createCounterTally(name: string, help: string, labelNames: readonly string[]): CounterTally {
  const series = new Map<string, Series>();
  return {
    inc(...labels) {
      const key = keyOf(labels);
      const s = series.get(key);
      if (s) s.count++;
      else series.set(key, { labels, count: 1 });
    },
    render() {
      const lines = [`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} counter`];
      for (const s of series.values()) lines.push(`${name}${labelText(labelNames, s.labels)} ${s.count}`);
      return lines.join('\n');
    },
  };
}

export type HistogramTally = { observe: (value: number, ...labels: string[]) => void; render: () => string };

/** `bounds` ascending; each bucket line counts the observations at or below its bound, as Prometheus defines them. */
export function createHistogramTally(name: string, help: string, labelNames: readonly string[], bounds: readonly number[]): HistogramTally {
  const series = new Map<string, HistogramSeries>();
  return {
    observe(value, ...labels) {
      if (!Number.isFinite(value)) return;
      const key = keyOf(labels);
      let s = series.get(key);
      if (!s) series.set(key, (s = { labels, count: 0, sum: 0, buckets: bounds.map(() => 0) }));
      s.count++;
      s.sum += value;
      // The first bound at or above the value; above every bound, only +Inf (the count) holds it.
      for (let i = 0; i < bounds.length; i++) {
        if (value <= bounds[i]!) {
          s.buckets[i]!++;
          break;
        }
      }
    },
    render() {
      const lines = [`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} histogram`];
      for (const s of series.values()) {
        let cumulative = 0;
        bounds.forEach((bound, i) => {
          cumulative += s.buckets[i]!;
          lines.push(`${name}_bucket${labelText(labelNames, s.labels, `le="${num(bound)}"`)} ${cumulative}`);
        });
        lines.push(`${name}_bucket${labelText(labelNames, s.labels, 'le="+Inf"')} ${s.count}`);
        lines.push(`${name}_sum${labelText(labelNames, s.labels)} ${num(s.sum)}`);
        lines.push(`${name}_count${labelText(labelNames, s.labels)} ${s.count}`);
      }
      return lines.join('\n');
    },
  };
}
