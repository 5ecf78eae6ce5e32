/**
 * A strict reader of the Prometheus text exposition format 0.0.4, for tests: every line must be a
 * HELP, a TYPE or a sample; a sample's family must have a TYPE line before it; histogram buckets
 * must be cumulative and end with `le="+Inf"` equal to `_count`. Throws on the first bad line.
 */
export interface ParsedSample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

export interface ParsedExposition {
  readonly types: Map<string, string>;
  readonly help: Map<string, string>;
  readonly samples: ParsedSample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

export function parseExposition(text: string): ParsedExposition {
  if (text !== '' && !text.endsWith('\n')) throw new Error('exposition must end with a newline');
  const types = new Map<string, string>();
  const help = new Map<string, string>();
  const samples: ParsedSample[] = [];
  const lines = text.split('\n').slice(0, -1);
  lines.forEach((line, index) => {
    const fail = (why: string): never => {
      throw new Error(`line ${index + 1} ${JSON.stringify(line)}: ${why}`);
    };
    if (line.startsWith('# HELP ')) {
      const [, name = '', doc = ''] = /^# HELP (\S+) (.*)$/.exec(line) ?? fail('bad HELP');
      if (!NAME.test(name)) fail('bad metric name');
      if (/\\[^\\n]/.test(doc.replace(/\\\\/g, ''))) fail('bad escape in HELP');
      if (help.has(name)) fail('second HELP');
      help.set(name, doc);
      return;
    }
    if (line.startsWith('# TYPE ')) {
      const [, name = '', type = ''] = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line) ?? fail('bad TYPE');
      if (types.has(name)) fail('second TYPE');
      if (samples.some((s) => familyOf(s.name, types) === name)) fail('TYPE after samples');
      types.set(name, type);
      return;
    }
    if (line.startsWith('#')) return;
    if (line.trim() === '') fail('blank line');
    let i = 0;
    while (i < line.length && /[a-zA-Z0-9_:]/.test(line[i]!)) i++;
    const name = line.slice(0, i);
    if (!NAME.test(name)) fail('bad sample name');
    const labels: Record<string, string> = {};
    if (line[i] === '{') {
      i++;
      while (line[i] !== '}') {
        const labelMatch = /^([a-zA-Z_][a-zA-Z0-9_]*)="/.exec(line.slice(i)) ?? fail(`bad label at ${i}`);
        const labelName = labelMatch[1]!;
        i += labelMatch[0].length;
        let value = '';
        for (;;) {
          const c = line[i];
          if (c === undefined) fail('unterminated label value');
          if (c === '"') break;
          if (c === '\\') {
            const e = line[i + 1];
            if (e === 'n') value += '\n';
            else if (e === '\\' || e === '"') value += e;
            else fail('bad escape in label value');
            i += 2;
          } else {
            value += c;
            i++;
          }
        }
        i++;
        if (labelName in labels) fail('repeated label');
        labels[labelName] = value;
        if (line[i] === ',') i++;
        else if (line[i] !== '}') fail('expected , or }');
      }
      i++;
    }
    const rest = line.slice(i);
    const valueMatch = /^ (\S+)( -?\d+)?$/.exec(rest) ?? fail('bad value part');
    const valueText = valueMatch[1]!;
    const value = valueText === '+Inf' ? Infinity : valueText === '-Inf' ? -Infinity : valueText === 'NaN' ? NaN : Number(valueText);
    if (!/^(\+Inf|-Inf|NaN|-?\d+(\.\d+)?([eE][-+]?\d+)?)$/.test(valueText)) fail('bad number');
    const family = familyOf(name, types);
    if (family === undefined) fail('sample without a TYPE line before it');
    samples.push({ name, labels, value });
  });
  checkHistograms(types, samples);
  return { types, help, samples };
}

function familyOf(name: string, types: Map<string, string>): string | undefined {
  if (types.has(name)) return name;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    const base = name.endsWith(suffix) ? name.slice(0, -suffix.length) : undefined;
    if (base !== undefined && types.get(base) === 'histogram') return base;
  }
  return undefined;
}

function checkHistograms(types: Map<string, string>, samples: ParsedSample[]): void {
  for (const [name, type] of types) {
    if (type === 'histogram') {
      const series = new Map<string, ParsedSample[]>();
      for (const s of samples.filter((x) => x.name === `${name}_bucket`)) {
        const { le, ...rest } = s.labels;
        if (le === undefined) throw new Error(`${name}_bucket without le`);
        const key = JSON.stringify(rest);
        series.set(key, [...(series.get(key) ?? []), s]);
      }
      for (const [key, buckets] of series) {
        for (let i = 1; i < buckets.length; i++) {
          if (buckets[i]!.value < buckets[i - 1]!.value) throw new Error(`${name}${key}: buckets not cumulative`);
          if (Number(buckets[i]!.labels['le']) <= Number(buckets[i - 1]!.labels['le'])) throw new Error(`${name}${key}: le not increasing`);
        }
        const last = buckets[buckets.length - 1]!;
        if (last.labels['le'] !== '+Inf') throw new Error(`${name}${key}: last bucket is not +Inf`);
        const count = samples.find((s) => s.name === `${name}_count` && JSON.stringify(s.labels) === key);
        if (count?.value !== last.value) throw new Error(`${name}${key}: _count ${count?.value} != +Inf bucket ${last.value}`);
        if (!samples.some((s) => s.name === `${name}_sum` && JSON.stringify(s.labels) === key)) throw new Error(`${name}${key}: no _sum`);
      }
    } else if (type === 'counter') {
      for (const s of samples.filter((x) => x.name === name)) if (!(s.value >= 0)) throw new Error(`${name}: negative counter`);
    }
  }
}

/** The value of the one sample named `name` whose labels include `labels`; undefined if none. */
export function sampleValue(parsed: ParsedExposition, name: string, labels: Record<string, string>): number | undefined {
  const matches = parsed.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (matches.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${matches.length} samples`);
  return matches[0]?.value;
}
