/**
 * Reads at most `maxChars` characters of a response body without buffering the rest: bytes are
 * pulled until enough text is decoded, then the stream is cancelled, so a paywall that sends an
 * endless body costs the reader `maxChars` and one chunk. UTF-8 is decoded in streaming mode, and
 * a cut never leaves half a surrogate pair.
 */
export async function readTextPrefix(res: Response, maxChars: number): Promise<{ text: string; truncated: boolean }> {
  if (!res.body) return { text: '', truncated: false };
  const reader = res.body.getReader();
  const decoder = new TextDecoder('utf-8');
  let text = '';
  for (;;) {
    const { done, value } = await reader.read();
    text += done ? decoder.decode() : decoder.decode(value, { stream: true });
    if (text.length > maxChars) {
      if (!done) await reader.cancel();
      return { text: cutAt(text, maxChars), truncated: true };
    }
    if (done) return { text, truncated: false };
  }
}

/** Cuts at `n` UTF-16 units without leaving half a surrogate pair. */
function cutAt(text: string, n: number): string {
  const code = text.charCodeAt(n - 1);
  return code >= 0xd800 && code <= 0xdbff ? text.slice(0, n - 1) : text.slice(0, n);
}
