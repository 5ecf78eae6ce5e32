/**
 * DER, the Distinguished Encoding Rules of ASN.1 (ITU-T X.690 §8 and §10), as far as a certificate
 * request needs it: writing only. Every value is TAG LENGTH CONTENTS. The tag byte is the class
 * (universal, or context-specific `[n]`), a constructed bit (0x20) and the type number; the length is
 * one byte below 128, else 0x80 + the number of length bytes followed by the length big-endian
 * (X.690 §8.1.3, DER's definite shortest form, §10.1). For example `INTEGER 0` is `02 01 00`, and a
 * SEQUENCE of it is `30 03 02 01 00`.
 *
 * The universal tags written here (X.690 §8, X.680 §8.6): BOOLEAN 0x01, INTEGER 0x02, BIT STRING 0x03,
 * OCTET STRING 0x04, OBJECT IDENTIFIER 0x06, UTF8String 0x0c, SEQUENCE 0x30, SET 0x31.
 */

/** TAG LENGTH CONTENTS (X.690 §8.1), with the shortest definite length (§10.1). */
export function tlv(tag: number, contents: Uint8Array): Buffer {
  const length = contents.length;
  if (length < 0x80) return Buffer.concat([Buffer.from([tag, length]), contents]);
  const lengthBytes: number[] = [];
  for (let rest = length; rest > 0; rest = Math.floor(rest / 256)) lengthBytes.unshift(rest % 256);
  return Buffer.concat([Buffer.from([tag, 0x80 | lengthBytes.length, ...lengthBytes]), contents]);
}

/** SEQUENCE (0x30): the items in order. */
export function sequence(...items: Uint8Array[]): Buffer {
  return tlv(0x30, Buffer.concat(items));
}

/**
 * SET OF (0x31). DER sorts the elements of a SET OF by their encodings (X.690 §11.6), done here,
 * so the caller's order does not matter.
 */
export function setOf(...items: Uint8Array[]): Buffer {
  return tlv(0x31, Buffer.concat([...items].sort(Buffer.compare)));
}

/** BOOLEAN (0x01): DER writes TRUE as 0xff (X.690 §11.1). */
export function boolean(value: boolean): Buffer {
  return tlv(0x01, Buffer.from([value ? 0xff : 0x00]));
}

/**
 * INTEGER (0x02) for a non-negative `value`: two's complement, shortest form (X.690 §8.3), so a
 * leading 0x00 is added when the top bit is set (128 is `02 02 00 80`).
 * @throws RangeError for a negative or non-integer number
 */
export function integer(value: number): Buffer {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`DER INTEGER: ${value} is not a non-negative integer`);
  const bytes: number[] = [];
  for (let rest = value; rest > 0; rest = Math.floor(rest / 256)) bytes.unshift(rest % 256);
  if (bytes.length === 0 || bytes[0]! >= 0x80) bytes.unshift(0);
  return tlv(0x02, Buffer.from(bytes));
}

/**
 * OBJECT IDENTIFIER (0x06) from dotted text (X.690 §8.19): the first two arcs as one number
 * 40·a + b, then every arc in base 128, high bit set on all bytes but an arc's last.
 * `2.5.4.3` (commonName) is `06 03 55 04 03`.
 * @throws RangeError for text that is not an OID (fewer than two arcs, a bad arc)
 */
export function objectIdentifier(dotted: string): Buffer {
  const arcs = dotted.split('.').map(Number);
  if (arcs.length < 2 || arcs.some((arc) => !Number.isSafeInteger(arc) || arc < 0) || arcs[0]! > 2 || (arcs[0]! < 2 && arcs[1]! > 39)) {
    throw new RangeError(`DER OBJECT IDENTIFIER: '${dotted}' is not an OID`);
  }
  const bytes: number[] = [];
  for (const arc of [arcs[0]! * 40 + arcs[1]!, ...arcs.slice(2)]) {
    const base128: number[] = [arc % 128];
    for (let rest = Math.floor(arc / 128); rest > 0; rest = Math.floor(rest / 128)) base128.unshift(0x80 | rest % 128);
    bytes.push(...base128);
  }
  return tlv(0x06, Buffer.from(bytes));
}

/** UTF8String (0x0c). */
export function utf8String(text: string): Buffer {
  return tlv(0x0c, Buffer.from(text, 'utf8'));
}

/** OCTET STRING (0x04): the bytes as they are (an X.509 extension's value is the DER of the extension, wrapped in one). */
export function octetString(bytes: Uint8Array): Buffer {
  return tlv(0x04, bytes);
}

/** BIT STRING (0x03) of whole bytes: the first content byte says 0 bits of the last byte are unused (X.690 §8.6.2). */
export function bitString(bytes: Uint8Array): Buffer {
  return tlv(0x03, Buffer.concat([Buffer.from([0]), bytes]));
}

/** A constructed context-specific tag `[n]` (0xa0 + n) around `items`: `[0] IMPLICIT SET OF` in a request's attributes. */
export function contextConstructed(n: number, ...items: Uint8Array[]): Buffer {
  return tlv(0xa0 | n, Buffer.concat(items));
}

/** A primitive context-specific tag `[n]` (0x80 + n): `dNSName [2] IMPLICIT IA5String` in a subjectAltName. */
export function contextPrimitive(n: number, bytes: Uint8Array): Buffer {
  return tlv(0x80 | n, bytes);
}
