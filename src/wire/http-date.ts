/**
 * The `Date` header's value (RFC 9110 §6.6.1): the time the message was generated, as an
 * IMF-fixdate (§5.6.7, `Sun, 06 Nov 1994 08:49:37 GMT`). It has a resolution of one second, so it
 * is formatted at most once a second and the string reused, as node:http (`utcDate`) and nginx
 * (`ngx_cached_http_time`) do: a busy proxy would otherwise build the same string for every response.
 */

let cachedDate = '';
let cachedSecond = Number.NaN;

/**
 * The IMF-fixdate of `nowMs` (ms since the epoch, default `Date.now()`), e.g.
 * `Tue, 01 Dec 2026 10:31:04 GMT`; the same string object for every call within one second.
 */
export function httpDate(nowMs: number = Date.now()): string {
  const second = Math.floor(nowMs / 1000);
  if (second !== cachedSecond) {
    cachedSecond = second;
    cachedDate = new Date(second * 1000).toUTCString();
  }
  return cachedDate;
}
