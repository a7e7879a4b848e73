// tests/web/test.mjs: run by tests/web/run.sh, which starts the server (S), makes an
// admin token (ADMIN) and publishes acme/tiny (version 1, alias prod; a refused
// pickle in the draft version 2) and acme/other. Opens the page in headless
// Chromium and checks what it shows against the JSON API; saves screenshots.
import { createRequire } from 'module';
import path from 'path';

const require = createRequire(import.meta.url);
const { chromium } = require('playwright-core');

const S = process.env.S;
const ADMIN = process.env.ADMIN;
const SHOTS = process.env.SHOTS;
let passed = 0;
let failed = 0;

function check(name, ok, detail) {
  if (ok) {
    passed++;
    console.log('ok   ' + name);
  } else {
    failed++;
    console.log('FAIL ' + name + (detail !== undefined ? ' ' + JSON.stringify(detail) : ''));
  }
}

async function api(p, token) {
  const r = await fetch(S + p, { headers: token ? { Authorization: 'Bearer ' + token } : {} });
  return r.json();
}

const count = n => Number(n).toLocaleString('en-US');

async function shot(page, name) {
  await page.screenshot({ path: path.join(SHOTS, name + '.png'), fullPage: true });
}

// goes to a hash route and waits until the page has rendered it
async function open(page, hash) {
  const before = await page.evaluate(() => document.body.dataset.ready || '');
  await page.evaluate(h => { location.hash = h; }, hash);
  await page.waitForFunction(b => (document.body.dataset.ready || '') !== b, before);
}

async function rows(page, tableId) {
  return page.$$eval('#' + tableId + ' tbody tr', trs =>
    trs.map(tr => Array.from(tr.querySelectorAll('td,th')).map(td => td.textContent.trim())));
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const consoleErrors = [];
  const dialogs = [];
  page.on('console', m => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', e => consoleErrors.push(String(e)));
  page.on('dialog', d => { dialogs.push(d.message()); d.dismiss(); });

  // --- the model list and search
  await page.goto(S + '/');
  await page.waitForSelector('#models-table');
  let list = await rows(page, 'models-table');
  const models = (await api('/v1/models')).models.map(m => m.name).sort();
  check('model list shows every model', JSON.stringify(list.map(r => r[0]).sort()) === JSON.stringify(models), list);
  const desc = list.find(r => r[0] === 'acme/tiny');
  check('the markup in a description is shown as text', desc && desc[1].startsWith('<img src=x onerror=alert(1)>'), desc);
  check('the markup made no element', (await page.$$('main img')).length === 0);
  await shot(page, '1-models');
  await page.fill('#search', 'oth');
  await page.waitForFunction(() => document.querySelectorAll('#models-table tbody tr').length === 1);
  list = await rows(page, 'models-table');
  check('search filters the list', list.length === 1 && list[0][0] === 'acme/other', list);

  // --- a model: versions and aliases
  await open(page, '#/acme/tiny');
  const model = await api('/v1/models/acme/tiny');
  const versions = await rows(page, 'versions-table');
  check('versions: one row per version', versions.length === model.versions.length, versions);
  const v1 = versions.find(r => r[0] === '1');
  check('version 1 is published and carries alias prod', v1 && v1[1] === 'published' && v1[2].includes('prod'), v1);
  const aliases = await rows(page, 'aliases-table');
  const apiAliases = Object.entries(model.aliases).map(([a, n]) => [a, String(n)]).sort();
  check('alias table as the API says (prod among them)',
    JSON.stringify(aliases) === JSON.stringify(apiAliases) && aliases.some(a => a[0] === 'prod'), aliases);
  check('the model heading', (await page.textContent('#model-name')) === 'acme/tiny');
  check('the description is text', (await page.textContent('#model-description')).startsWith('<img src=x'));
  await shot(page, '2-model');

  // --- a version: files
  await open(page, '#/acme/tiny@1');
  const files = (await api('/v1/models/acme/tiny/versions/1/files')).files;
  const frows = await page.$$eval('#files-table tbody tr', trs => trs.map(tr => ({
    path: tr.dataset.path,
    cells: Array.from(tr.querySelectorAll('td')).map(td => td.textContent.trim()),
    bytes: tr.querySelector('td[data-bytes]').dataset.bytes,
  })));
  check('files: one row per file', frows.length === files.length, frows);
  for (const f of files) {
    const r = frows.find(x => x.path === f.path);
    check('file ' + f.path + ': kind, size, sha256 as the API says',
      r && r.cells[1] === f.kind && r.bytes === String(f.size) && r.cells[3] === f.sha256, { r, f });
    check('file ' + f.path + ': verdict', r && r.cells[4].startsWith('accepted: ' + f.kind), r);
  }
  await shot(page, '3-version');

  // --- a safetensors file: the tensor table
  await open(page, '#/acme/tiny@1/model.safetensors');
  const header = await api('/v1/models/acme/tiny/versions/1/files/model.safetensors/header');
  const trows = await rows(page, 'tensors-table');
  check('tensor table: one row per tensor', trows.length === header.tensors.length, trows);
  for (const t of header.tensors) {
    const r = trows.find(x => x[0] === t.name);
    const n = t.shape.reduce((a, b) => a * b, 1);
    check('tensor ' + t.name + ': dtype, shape, parameters, NaN, Inf',
      r && r[1] === t.dtype && r[2] === '[' + t.shape.join(', ') + ']' && r[3] === count(n) &&
        r[4] === String(t.nan) && r[5] === String(t.inf), { r, t });
  }
  const drows = await rows(page, 'dtype-table');
  for (const [d, n] of Object.entries(header.parameters)) {
    const r = drows.find(x => x[0] === d);
    check('parameters of ' + d, r && r[1] === count(n), { r, n });
  }
  const total = drows.find(x => x[0] === 'total');
  check('total parameters and NaN/Inf', total && total[1] === count(header.parameters_total) &&
    total[2] === header.nan_total + ' NaN, ' + header.inf_total + ' Inf', total);
  await shot(page, '4-tensors');

  // --- a GGUF file: its metadata and tensor table
  await open(page, '#/acme/tiny@1');
  check('the GGUF file row is a link', (await page.$('#files-table tr[data-path="tiny-Q8_0.gguf"] a')) !== null);
  await open(page, '#/acme/tiny@1/tiny-Q8_0.gguf');
  const g = await api('/v1/models/acme/tiny/versions/1/files/tiny-Q8_0.gguf/header');
  const summary = await page.textContent('#gguf-summary');
  check('GGUF summary: version, architecture, alignment, data offset',
    summary.startsWith('GGUF v' + g.version + ', ' + g.architecture) && summary.includes('alignment ' + g.alignment) &&
      summary.includes(count(g.data_start)), summary);
  const grows = await rows(page, 'tensors-table');
  check('GGUF tensor table: one row per tensor', grows.length === g.tensors.length && g.tensors.length === 2, grows);
  for (const t of g.tensors) {
    const r = grows.find(x => x[0] === t.name);
    check('GGUF tensor ' + t.name + ': type, row-major shape, parameters, offset, bytes',
      r && r[1] === t.dtype && r[2] === '[' + t.shape.join(', ') + ']' &&
        r[3] === count(t.shape.reduce((a, b) => a * b, 1)) && r[4] === count(t.offset) && r[5] === count(t.size), { r, t });
  }
  const mrows = await rows(page, 'metadata-table');
  check('GGUF metadata: one row per key, in order', JSON.stringify(mrows.map(r => r[0])) === JSON.stringify(Object.keys(g.metadata)), mrows);
  const tok = mrows.find(r => r[0] === 'tokenizer.ggml.tokens');
  check('a long array shows its type, length and first elements',
    tok && tok[1] === 'array of string' && tok[2].startsWith('string[20]: ["t0","t1"') && tok[2].endsWith('…'), tok);
  const name = mrows.find(r => r[0] === 'general.name');
  check('markup in a GGUF value is text', name && name[2] === '<script>alert(1)</script> tiny' &&
    (await page.$$('main script')).length === 0, name);
  const gtotal = (await rows(page, 'dtype-table')).find(x => x[0] === 'total');
  check('GGUF parameter total', gtotal && gtotal[1] === count(g.parameters_total), gtotal);
  await shot(page, '4b-gguf');

  // --- refusals: not without a token, shown with the admin token
  await open(page, '#/rejections');
  check('refusals need a token', (await page.$('#need-token')) !== null && (await page.$('#rejections-table')) === null);
  await page.fill('#token', ADMIN);
  const before = await page.evaluate(() => document.body.dataset.ready || '');
  await page.click('#token-form button[type=submit]');
  await page.waitForFunction(b => (document.body.dataset.ready || '') !== b, before);
  const rej = (await api('/v1/rejections', ADMIN)).rejections;
  const rrows = await rows(page, 'rejections-table');
  check('refusals: one row per refusal', rej.length > 0 && rrows.length === rej.length, { rrows, rej });
  check('the refused pickle is listed with its reason',
    rrows.some(r => r[2] === 'model.safetensors' && r[3] === rej[0].reason), rrows);
  check('a refusal shows its size and the SHA-256 of its bytes',
    rrows.some(r => r[6] === String(rej[0].size) && r[7] === (rej[0].sha256 || '')), rrows);
  check('code admitted by the policy is listed, marked as admitted',
    rej.filter(r => r.outcome === 'admitted_by_policy').length === 2 &&
      (await page.$$('#rejections-table .badge.code')).length === 2, rej);
  check('the token is not in the URL', !page.url().includes(ADMIN));
  check('the token is in sessionStorage only', await page.evaluate(t =>
    sessionStorage.getItem('tensorgate.token') === t && localStorage.length === 0, ADMIN));
  await shot(page, '5-refusals');

  // --- a version that holds code (admitted by acme's code policy) is marked
  await open(page, '#/');
  await page.waitForSelector('#models-table');
  const codedRow = await page.$('#models-table tr[data-model="acme/coded"] .badge.code');
  const plainRow = await page.$('#models-table tr[data-model="acme/tiny"] .badge.code');
  check('the model list marks the model that holds code, only it', codedRow !== null && plainRow === null);
  await open(page, '#/acme/coded');
  const vcoded = await rows(page, 'versions-table');
  check('its version is marked in the versions table',
    vcoded.length === 1 && vcoded[0][1].startsWith('published') &&
      (await page.$('#versions-table tr[data-version="1"] .badge.code')) !== null, vcoded);
  await open(page, '#/acme/coded@1');
  const coded = await api('/v1/models/acme/coded/versions/1');
  const warning = await page.$('#code-warning');
  const warningText = warning ? await warning.textContent() : '';
  check('the version page shows the code badge and names the code files',
    coded.holds_code && warning !== null && (await page.$('#code-warning .badge.code')) !== null &&
      coded.code_files.every(c => warningText.includes(c.path) && warningText.includes(c.reason)),
    { warningText, coded });
  const crows = await page.$$eval('#files-table tbody tr', trs => trs.map(tr => ({
    path: tr.dataset.path, badge: tr.querySelector('.badge.code') !== null,
    cells: Array.from(tr.querySelectorAll('td')).map(td => td.textContent.trim()) })));
  check('each code file carries the badge and its reason', crows.length === 2 &&
    crows.every(r => r.badge && r.cells[1].includes(coded.code_files.find(c => c.path === r.path).reason)), crows);
  await shot(page, '6-code');
  await open(page, '#/acme/tiny@1');
  check('a version without code has no badge', (await page.$('#code-warning')) === null &&
    (await page.$('.badge.code')) === null);

  // --- a deprecated version is marked, with its reason; another is not
  await open(page, '#/acme/old');
  await page.waitForSelector('#versions-table');
  check('a deprecated version is marked in the versions table',
    (await page.$('#versions-table tr[data-version="1"] .badge.deprecated')) !== null);
  await open(page, '#/acme/old@1');
  await page.waitForSelector('#deprecated-warning');
  const dep = await page.textContent('#deprecated-warning');
  check('the version page says it is deprecated and why', dep.includes('superseded'), dep);
  await open(page, '#/acme/tiny@1');
  check('a version not deprecated has no mark', (await page.$('.badge.deprecated')) === null);

  // --- an unknown model: an error, not a crash
  await open(page, '#/acme/nope');
  const err = await page.textContent('#error');
  check('an unknown model shows the API reason', err && err.includes('model_not_found'), err);

  check('no console errors (404 of the unknown model aside)',
    consoleErrors.filter(e => !e.includes('404')).length === 0, consoleErrors);
  check('no dialog was opened (the markup stayed inert)', dialogs.length === 0, dialogs);
  await browser.close();
}

try {
  await main();
} catch (e) {
  failed++;
  console.log('FAIL ' + (e && e.stack ? e.stack : e));
}
console.log(passed + ' passed, ' + failed + ' failed');
process.exit(failed ? 1 : 0);
