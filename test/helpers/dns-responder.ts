/**
 * A DNS server for tests (RFC 1035 §4 message format, over UDP on node:dgram). By default it answers
 * every A question with 127.0.0.1 (TTL 60) and every other question (AAAA included) with no records
 * (NOERROR), so a program told to use it (Pebble's `-dnsserver`) reaches any name on the IPv4
 * loopback. Tests of discovery set, per name and type, records with TTLs (A, AAAA, SRV per RFC 2782)
 * or a behaviour (NXDOMAIN, NODATA, SERVFAIL, REFUSED, silence, a garbage answer), change them at run
 * time, and read the questions with their arrival time. Garbage queries are ignored, never fatal.
 */
import dgram from 'node:dgram';
import type { AddressInfo } from 'node:net';

const TYPE_CODES = { A: 1, AAAA: 28, SRV: 33 } as const;
const TYPE_NAMES: Record<number, string> = { 1: 'A', 28: 'AAAA', 33: 'SRV' };
export type DnsType = keyof typeof TYPE_CODES;

export type DnsRecord =
  | { readonly address: string; readonly ttl: number } // A or AAAA
  | { readonly priority: number; readonly weight: number; readonly port: number; readonly target: string; readonly ttl: number }; // SRV

/**
 * A canned behaviour instead of records: RCODE 3, NOERROR without records, RCODE 2, RCODE 5, no
 * answer, an undecodable answer (a header claiming three records, then a few bytes), or noise (the
 * query's ID, then a response's flags without TC and 28 bytes of noise: not a DNS message).
 */
export type DnsBehaviour = 'nxdomain' | 'nodata' | 'servfail' | 'refused' | 'silence' | 'garbage' | 'noise';

/** The 30 bytes of a `noise` answer after the query's ID (fixed, so a test fails the same way every run). */
const NOISE = Buffer.from('8180e07b54d8aa1e37c90b6f2d84e5137ac0fe29d64b81c0537e9a129f3a', 'hex');

/** One question as it arrived: `atMs` from `performance.now()`. */
export interface DnsQuestion {
  readonly name: string;
  readonly type: string;
  readonly atMs: number;
}

export interface DnsResponder {
  readonly address: string;
  readonly port: number;
  /** `acme.test A`, `acme.test AAAA`, … in arrival order. */
  readonly questions: string[];
  /** The same questions with their arrival time. */
  readonly log: DnsQuestion[];
  /** Sets what `name` (case-insensitive) answers for `type`, replacing what it answered before. */
  set(name: string, type: DnsType, answer: readonly DnsRecord[] | DnsBehaviour): void;
  /** The questions for `name` and `type` so far. */
  count(name: string, type: DnsType): number;
  /** Holds every answer for `name` (case-insensitive) `ms` before sending it (0: at once, the default). */
  delay(name: string, ms: number): void;
  close(): Promise<void>;
}

export async function startDnsResponder(options: { readonly address?: string } = {}): Promise<DnsResponder> {
  const address = options.address ?? '127.0.0.1';
  const socket = dgram.createSocket(address.includes(':') ? 'udp6' : 'udp4');
  const questions: string[] = [];
  const log: DnsQuestion[] = [];
  const answers = new Map<string, readonly DnsRecord[] | DnsBehaviour>();
  const delays = new Map<string, number>();
  let askedName = '';
  let isClosed = false;
  socket.on('error', () => {}); // a send to a vanished peer must not crash the test run
  socket.on('message', (query, peer) => {
    let answer: Buffer | undefined;
    try {
      answer = answerQuery(query, (name, type) => {
        askedName = name.toLowerCase();
        questions.push(`${name} ${TYPE_NAMES[type] ?? type}`);
        log.push({ name, type: TYPE_NAMES[type] ?? String(type), atMs: performance.now() });
        return answers.get(`${name.toLowerCase()} ${type}`);
      });
    } catch {
      answer = undefined; // garbage in: no answer
    }
    if (answer === undefined) return;
    const send = (bytes: Buffer): void => {
      if (!isClosed) socket.send(bytes, peer.port, peer.address);
    };
    const delayMs = delays.get(askedName) ?? 0;
    if (delayMs > 0) setTimeout(() => send(answer), delayMs);
    else send(answer);
  });
  await new Promise<void>((resolve) => socket.bind(0, address, resolve));
  return {
    address,
    port: (socket.address() as AddressInfo).port,
    questions,
    log,
    set: (name, type, answer) => void answers.set(`${name.toLowerCase()} ${TYPE_CODES[type]}`, answer),
    delay: (name, ms) => void delays.set(name.toLowerCase(), ms),
    count: (name, type) => log.filter((q) => q.name.toLowerCase() === name.toLowerCase() && q.type === type).length,
    close: () => {
      isClosed = true;
      return new Promise((resolve) => socket.close(() => resolve()));
    },
  };
}

/** The answer to a one-question query, or undefined for no answer (not a query, or `silence`). */
function answerQuery(query: Buffer, find: (name: string, type: number) => readonly DnsRecord[] | DnsBehaviour | undefined): Buffer | undefined {
  if (query.length < 12 || query.readUInt16BE(4) !== 1 || (query[2]! & 0x80) !== 0) return undefined;
  // The question: labels (length-prefixed, ending with 0), then QTYPE and QCLASS (RFC 1035 §4.1.2).
  const labels: string[] = [];
  let offset = 12;
  while (offset < query.length && query[offset] !== 0) {
    const length = query[offset]!;
    if (length > 63) return undefined; // a pointer or reserved bits: not in a question we accept
    labels.push(query.subarray(offset + 1, offset + 1 + length).toString('ascii'));
    offset += 1 + length;
  }
  const questionEnd = offset + 5;
  if (questionEnd > query.length) return undefined;
  const type = query.readUInt16BE(offset + 1);
  const name = labels.join('.');
  const configured = find(name, type);
  if (configured === 'silence') return undefined;
  const records = configured === undefined ? (type === TYPE_CODES.A ? [{ address: '127.0.0.1', ttl: 60 }] : []) : typeof configured === 'string' ? [] : configured;
  const rcode = configured === 'nxdomain' ? 3 : configured === 'servfail' ? 2 : configured === 'refused' ? 5 : 0;
  const header = Buffer.alloc(12);
  header.writeUInt16BE(query.readUInt16BE(0), 0); // the query's ID
  header.writeUInt16BE(0x8580 | (query.readUInt16BE(2) & 0x0100) | rcode, 2); // QR, AA, RA, the query's RD, RCODE
  header.writeUInt16BE(1, 4); // QDCOUNT
  header.writeUInt16BE(records.length, 6); // ANCOUNT
  const question = query.subarray(12, questionEnd);
  if (configured === 'noise') return Buffer.concat([query.subarray(0, 2), NOISE]);
  if (configured === 'garbage') {
    header.writeUInt16BE(3, 6); // claims three answers, carries a few bytes of one
    return Buffer.concat([header, question, Buffer.from([0xc0, 0x0c, 0, type >> 8, type & 0xff, 0, 1, 0xff])]);
  }
  return Buffer.concat([header, question, ...records.map((record) => resourceRecord(type, record))]);
}

/** NAME (a pointer to the question's name at offset 12), TYPE, CLASS IN, TTL, RDLENGTH, RDATA (RFC 1035 §4.1.3). */
function resourceRecord(type: number, record: DnsRecord): Buffer {
  const rdata = 'target' in record ? srvData(record) : type === TYPE_CODES.AAAA ? ipv6Bytes(record.address) : Buffer.from(record.address.split('.').map(Number));
  const fixed = Buffer.alloc(12);
  fixed.writeUInt16BE(0xc00c, 0);
  fixed.writeUInt16BE(type, 2);
  fixed.writeUInt16BE(1, 4);
  fixed.writeUInt32BE(record.ttl, 6);
  fixed.writeUInt16BE(rdata.length, 10);
  return Buffer.concat([fixed, rdata]);
}

/** PRIORITY, WEIGHT, PORT, TARGET as uncompressed labels (RFC 2782). */
function srvData(record: { priority: number; weight: number; port: number; target: string }): Buffer {
  const head = Buffer.alloc(6);
  head.writeUInt16BE(record.priority, 0);
  head.writeUInt16BE(record.weight, 2);
  head.writeUInt16BE(record.port, 4);
  const labels = record.target.split('.').filter((label) => label !== '');
  return Buffer.concat([head, ...labels.map((label) => Buffer.concat([Buffer.from([label.length]), Buffer.from(label, 'ascii')])), Buffer.from([0])]);
}

/** 16 bytes of an IPv6 address (`::` expanded). */
function ipv6Bytes(address: string): Buffer {
  const [head = '', tail] = address.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = [...headGroups, ...Array<string>(8 - headGroups.length - tailGroups.length).fill('0'), ...tailGroups];
  const bytes = Buffer.alloc(16);
  groups.forEach((group, i) => bytes.writeUInt16BE(parseInt(group, 16), i * 2));
  return bytes;
}
