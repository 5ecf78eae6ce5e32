/**
 * The Prometheus text exposition format, version 0.0.4 (prometheus.io/docs/instrumenting/
 * exposition_formats): per metric family a `# HELP name text` line, a `# TYPE name counter|gauge|
 * histogram` line, then one sample a line, `name{label="value",…} number`. Escapes, as the format
 * says: in HELP text `\` → `\\` and newline → `\n`; in label values also `"` → `\"`. Numbers are Go
 * floats: `+Inf`, `-Inf`, `NaN` spelled out. A histogram's samples are `name_bucket{le="…"}`
 * (cumulative, ending with `le="+Inf"`), `name_sum` and `name_count`.
 */

/** The Content-Type of this format. */
export const EXPOSITION_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export type MetricType = 'counter' | 'gauge' | 'histogram';

export interface Sample {
  /** Appended to the family name: `_bucket`, `_sum`, `_count` for histograms, '' otherwise. */
  readonly suffix?: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface MetricFamily {
  /** `[a-zA-Z_:][a-zA-Z0-9_:]*`; counters end in `_total` by convention. */
  readonly name: string;
  readonly help: string;
  readonly type: MetricType;
  readonly samples: readonly Sample[];
}

/** Renders families in the given order; each ends with a newline, as the format requires. */
export function renderExposition(families: readonly MetricFamily[]): string {
  const lines: string[] = [];
  for (const family of families) {
    lines.push(`# HELP ${family.name} ${escapeHelp(family.help)}`);
    lines.push(`# TYPE ${family.name} ${family.type}`);
    for (const sample of family.samples) {
      const labels = Object.entries(sample.labels).map(([name, value]) => `${name}="${escapeLabelValue(value)}"`);
      lines.push(`${family.name}${sample.suffix ?? ''}${labels.length === 0 ? '' : `{${labels.join(',')}}`} ${formatNumber(sample.value)}`);
    }
  }
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

/** `\` → `\\`, `"` → `\"`, newline → `\n`. */
export function escapeLabelValue(value: string): string {
  return value.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`));
}

/** `\` → `\\`, newline → `\n`. */
export function escapeHelp(text: string): string {
  return text.replace(/[\\\n]/g, (c) => (c === '\n' ? '\\n' : '\\\\'));
}

/** A Go-style float: `+Inf`, `-Inf`, `NaN`, else the shortest round-tripping decimal. */
export function formatNumber(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}

/**
 * The samples of one histogram: cumulative `_bucket`s over `bounds` and `+Inf`, `_sum`, `_count`.
 * @param counts per-bucket counts, not cumulative, `bounds.length + 1` of them (the last is above every bound)
 */
export function histogramSamples(labels: Readonly<Record<string, string>>, bounds: readonly number[], counts: readonly number[], sum: number): Sample[] {
  const samples: Sample[] = [];
  let cumulative = 0;
  bounds.forEach((bound, index) => {
    cumulative += counts[index] ?? 0;
    samples.push({ suffix: '_bucket', labels: { ...labels, le: formatNumber(bound) }, value: cumulative });
  });
  cumulative += counts[bounds.length] ?? 0;
  samples.push({ suffix: '_bucket', labels: { ...labels, le: '+Inf' }, value: cumulative });
  samples.push({ suffix: '_sum', labels, value: sum });
  samples.push({ suffix: '_count', labels, value: cumulative });
  return samples;
}
