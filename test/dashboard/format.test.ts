import { describe, expect, test } from 'vitest';
import { csvField, csvRow } from '../../src/dashboard/csv.js';
import { usd } from '../../src/dashboard/format.js';
import { escapeHtml, html, safeHref, trusted } from '../../src/dashboard/html.js';
import { MultipartError, multipartBoundary, parseMultipart } from '../../src/dashboard/multipart.js';
import { serviceFromWireJson } from '../../src/domain/serviceRecordJson.js';
import { DomainError } from '../../src/domain/errors.js';

/** A small RFC 4180 reader, written independently of csv.ts, to check what a spreadsheet would see. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') (field += '"'), i++;
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') row.push(field), (field = '');
    else if (c === '\r' && text[i + 1] === '\n') row.push(field), rows.push(row), (row = []), (field = ''), i++;
    else field += c;
  }
  return rows;
}

describe('escapeHtml / html', () => {
  test('behavior: all five special characters are escaped in interpolations, never in the template', () => {
    expect(escapeHtml(`<a href="x" onclick='y'>&</a>`)).toBe('&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
    const name = '"><script>alert(1)</script>';
    expect(html`<input value="${name}"><b>${name}</b>`.value).toBe(
      '<input value="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"><b>&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;</b>',
    );
  });

  test('behavior: nested Html stays markup, arrays concatenate, false/null/undefined render nothing', () => {
    const items = ['<1>', '<2>'].map((x) => html`<li>${x}</li>`);
    expect(html`<ul>${items}</ul>${false}${null}${undefined}${0}${5n}`.value).toBe('<ul><li>&lt;1&gt;</li><li>&lt;2&gt;</li></ul>05');
    expect(html`${trusted('<path d="M0,0"/>')}`.value).toBe('<path d="M0,0"/>');
  });

  test('behavior: only http(s) URLs become links', () => {
    expect(safeHref('https://docs.example.com/x')).toBe('https://docs.example.com/x');
    expect(safeHref('javascript:alert(1)')).toBe('#');
    expect(safeHref(' data:text/html,x')).toBe('#');
  });
});

describe('csvField / csvRow', () => {
  test('behavior: quotes commas, quotes, line breaks and edge spaces; doubles inner quotes', () => {
    expect(csvField('plain')).toBe('plain');
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "no"')).toBe('"say ""no"""');
    expect(csvField('two\nlines')).toBe('"two\nlines"');
    expect(csvField('cr\rlf')).toBe('"cr\rlf"');
    expect(csvField(' padded')).toBe('" padded"');
    expect(csvField('')).toBe('');
  });

  test('behavior: text a spreadsheet would run as a formula gets a leading apostrophe; safe cells are untouched', () => {
    expect(csvField('=HYPERLINK("http://evil","x")')).toBe(`"'=HYPERLINK(""http://evil"",""x"")"`);
    expect(csvField('+1')).toBe("'+1");
    expect(csvField('-2')).toBe("'-2");
    expect(csvField('@SUM(A1)')).toBe("'@SUM(A1)");
    expect(csvField({ safe: '-0.5' })).toBe('-0.5');
  });

  test('behavior: rows end in CRLF and read back to the original cells', () => {
    const cells = ['id-1', 'Denied by approver: he said "no", twice\nreally', '', { safe: '12.5' }] as const;
    const text = csvRow(['a', 'b', 'c', 'd']) + csvRow(cells);
    expect(text.endsWith('\r\n')).toBe(true);
    expect(parseCsv(text)).toEqual([['a', 'b', 'c', 'd'], ['id-1', 'Denied by approver: he said "no", twice\nreally', '', '12.5']]);
  });
});

describe('usd', () => {
  test('behavior: two decimals at least, all six kept, thousands grouped', () => {
    expect(usd(0n)).toBe('$0.00');
    expect(usd(1_500_000n)).toBe('$1.50');
    expect(usd(1n)).toBe('$0.000001');
    expect(usd(1_234_567_890_000n)).toBe('$1,234,567.89');
  });
});

describe('parseMultipart', () => {
  const boundary = '----formBoundaryX7';
  const body = (parts: string[]) => Buffer.from(`${parts.map((p) => `--${boundary}\r\n${p}\r\n`).join('')}--${boundary}--\r\n`, 'utf8');

  test('behavior: fields and files by name, file bytes exactly as sent (CRLF inside kept)', async () => {
    const parts = await parseMultipart(body([
      'Content-Disposition: form-data; name="_csrf"\r\n\r\ntok',
      'Content-Disposition: form-data; name="file"; filename="registry.json"\r\nContent-Type: application/json\r\n\r\n[{"slug":"a"}]\r\n',
      'Content-Disposition: form-data; name="json"\r\n\r\n',
      'Content-Disposition: form-data; name="file"; filename=""\r\nContent-Type: application/octet-stream\r\n\r\n',
      'Content-Disposition: form-data; name="note"\r\nContent-Type: application/octet-stream\r\n\r\nh\u00e9',
    ]), boundary);
    expect(parts.map((p) => [p.name, p.filename, p.data.toString('utf8')])).toEqual([
      ['_csrf', undefined, 'tok'], ['file', 'registry.json', '[{"slug":"a"}]\r\n'], ['json', undefined, ''], ['file', '', ''], ['note', undefined, 'h\u00e9'],
    ]);
  });

  test('behavior: a field or file as large as the body allows is kept whole', async () => {
    const big = 'x'.repeat(1024 * 1024 + 10);
    const parts = await parseMultipart(body([`Content-Disposition: form-data; name="json"\r\n\r\n${big}`, `Content-Disposition: form-data; name="file"; filename="r.json"\r\n\r\n${big}`]), boundary);
    expect(parts.map((p) => p.data.length)).toEqual([big.length, big.length]);
  });

  test('behavior: boundary read from the Content-Type, quoted or not; other types give none', () => {
    expect(multipartBoundary(`multipart/form-data; boundary=${boundary}`)).toBe(boundary);
    expect(multipartBoundary('multipart/form-data; boundary="a b"')).toBe('a b');
    expect(multipartBoundary('application/x-www-form-urlencoded')).toBeUndefined();
  });

  test('error: truncated bodies, parts without a name and too many parts are refused', async () => {
    await expect(parseMultipart(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="x"\r\n\r\nno end`), boundary)).rejects.toThrow(MultipartError);
    await expect(parseMultipart(body(['Content-Disposition: form-data; filename="f"\r\n\r\nx']), boundary)).rejects.toThrow(/without a name/);
    await expect(parseMultipart(body(['Content-Disposition: form-data\r\n\r\nx']), boundary)).rejects.toThrow(/without a name/);
    await expect(parseMultipart(Buffer.from('nothing here'), boundary)).rejects.toThrow(/malformed multipart body/);
    const many = Array.from({ length: 25 }, (_, i) => `Content-Disposition: form-data; name="f${i}"\r\n\r\nx`);
    await expect(parseMultipart(body(many), boundary)).rejects.toThrow(/at most 20/);
  });
});

describe('serviceFromWireJson', () => {
  test('behavior: the /api/resolve shape maps field by field; null price means dynamic', () => {
    const r = serviceFromWireJson({
      slug: 'weather', name: 'Weather', paymentMethods: [{ protocol: 'x402', baseUrl: 'https://w.example', realm: '' }],
      endpoints: [{ method: 'GET', path: '/now', priceAtomic: null }, { method: 'GET', path: '/week', priceAtomic: '1000' }],
    }, 'record 1');
    expect(r).toMatchObject({ id: '', slug: 'weather', name: 'Weather', description: '', paymentMethods: [{ protocol: 'x402', baseUrl: 'https://w.example', realm: '' }] });
    expect(r.endpoints.map((e) => e.priceAtomic)).toEqual([null, '1000']);
  });

  test('error: invalid_argument naming the record for unknown keys and wrong types', () => {
    expect(() => serviceFromWireJson({ slug: 'a', base_url: 'x' }, 'record 2')).toThrow(/record 2 has unknown field "base_url"/);
    expect(() => serviceFromWireJson({ slug: 1 }, 'record 3')).toThrow(/record 3.slug must be a string/);
    expect(() => serviceFromWireJson([], 'record 4')).toThrow(DomainError);
  });
});
