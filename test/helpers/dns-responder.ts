/**
 * A DNS server for tests (RFC 1035 §4 message format, over UDP on node:dgram) that answers every A
 * question with 127.0.0.1 and every other question (AAAA included) with no records (NOERROR), so a
 * program told to use it (Pebble's `-dnsserver`) reaches any name on the IPv4 loopback. It records
 * each question as `NAME TYPE`.
 */
import dgram from 'node:dgram';
import type { AddressInfo } from 'node:net';

const TYPE_A = 1;
const TYPE_NAMES: Record<number, string> = { 1: 'A', 28: 'AAAA' };

export interface DnsResponder {
  readonly port: number;
  /** `acme.test A`, `acme.test AAAA`, … in arrival order. */
  readonly questions: string[];
  close(): Promise<void>;
}

export async function startDnsResponder(): Promise<DnsResponder> {
  const socket = dgram.createSocket('udp4');
  const questions: string[] = [];
  socket.on('message', (query, peer) => {
    const answer = answerQuery(query, questions);
    if (answer !== undefined) socket.send(answer, peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    port: (socket.address() as AddressInfo).port,
    questions,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
}

/** The answer to a one-question query, or undefined for a message that is not one (ignored). */
function answerQuery(query: Buffer, questions: string[]): Buffer | undefined {
  if (query.length < 12 || query.readUInt16BE(4) !== 1) return undefined;
  // The question: labels (length-prefixed, ending with 0), then QTYPE and QCLASS (RFC 1035 §4.1.2).
  const labels: string[] = [];
  let offset = 12;
  while (offset < query.length && query[offset] !== 0) {
    const length = query[offset]!;
    labels.push(query.subarray(offset + 1, offset + 1 + length).toString('ascii'));
    offset += 1 + length;
  }
  const questionEnd = offset + 5;
  if (questionEnd > query.length) return undefined;
  const type = query.readUInt16BE(offset + 1);
  questions.push(`${labels.join('.')} ${TYPE_NAMES[type] ?? type}`);
  const isA = type === TYPE_A;
  const header = Buffer.alloc(12);
  header.writeUInt16BE(query.readUInt16BE(0), 0); // the query's ID
  header.writeUInt16BE(0x8580 | (query.readUInt16BE(2) & 0x0100), 2); // QR, AA, RA, the query's RD; RCODE 0
  header.writeUInt16BE(1, 4); // QDCOUNT
  header.writeUInt16BE(isA ? 1 : 0, 6); // ANCOUNT
  const question = query.subarray(12, questionEnd);
  if (!isA) return Buffer.concat([header, question]);
  // NAME (a pointer to the question's name at offset 12), TYPE A, CLASS IN, TTL 60, RDLENGTH 4, 127.0.0.1.
  const record = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
  return Buffer.concat([header, question, record]);
}
