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
  // every Content-Security-Policy violation in the page is a failure (checked at the end)
  await page.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
  });

  // --- the model list: pages of 25, sorting, search
  await page.goto(S + '/');
  await page.waitForSelector('#models-table');
  const apiModels = [];
  for (let cursor = null; ;) {
    const pg = await api('/v1/models?limit=1000' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
    apiModels.push(...pg.models);
    cursor = pg.next_cursor;
    if (!cursor) break;
  }
  const models = apiModels.map(m => m.name).sort();
  let list = await rows(page, 'models-table');
  check('the first page has 25 models', list.length === 25 && models.length > 25, { shown: list.length, all: models.length });
  check('the page count', (await page.textContent('#page-info')).includes('page 1 of ' + Math.ceil(models.length / 25)));
  check('previous is disabled on the first page', await page.$eval('#page-prev', b => b.disabled));
  const seen = list.map(r => r[0]);
  while (!(await page.$eval('#page-next', b => b.disabled))) {
    await page.click('#page-next');
    seen.push(...(await rows(page, 'models-table')).map(r => r[0]));
  }
  check('the pages together show every model once, by name',
    JSON.stringify(seen) === JSON.stringify(models), { seen, models });
  await page.selectOption('#sort', 'updated');
  list = await rows(page, 'models-table');
  const byTime = apiModels.slice().sort((a, b) => (b.updated_at || b.created_at) < (a.updated_at || a.created_at) ? -1 :
    (b.updated_at || b.created_at) > (a.updated_at || a.created_at) ? 1 : 0);
  check('sorted by last update: newest first, back to page 1',
    list.length === 25 && list[0][3] === (byTime[0].updated_at || byTime[0].created_at) &&
    (await page.textContent('#page-info')).includes('page 1 of'), list[0]);
  const times = list.map(r => r[3]);
  check('the update times are in order', times.every((t, i) => i === 0 || times[i - 1] >= t), times);
  await page.selectOption('#sort', 'name');
  await page.fill('#search', 'tin');
  await page.waitForFunction(() => document.querySelectorAll('#models-table tbody tr').length === 1);
  list = await rows(page, 'models-table');
  const desc = list.find(r => r[0] === 'acme/tiny');
  check('the markup in a description is shown as text', desc && desc[1].startsWith('<img src=x onerror=alert(1)>'), desc);
  check('the markup made no element', (await page.$$('main img')).length === 0);
  await shot(page, '1-models');
  await page.fill('#search', 'oth');
  await page.waitForFunction(() => document.querySelectorAll('#models-table tbody tr').length === 1);
  list = await rows(page, 'models-table');
  check('search filters the list', list.length === 1 && list[0][0] === 'acme/other', list);
  // tags and downloads come from other parts of the API: checked once it reports them
  const tagged = apiModels.filter(m => Array.isArray(m.tags) && m.tags.length);
  if (tagged.length) {
    await page.fill('#search', tagged[0].name);
    await page.waitForFunction(n => Array.from(document.querySelectorAll('#models-table tbody tr'))
      .some(tr => tr.dataset.name === n), tagged[0].name);
    const tagCells = await page.$$eval('#models-table tbody tr', (trs, n) => trs.filter(tr => tr.dataset.name === n)
      .map(tr => Array.from(tr.querySelectorAll('td.tags .pill')).map(p => p.textContent)), tagged[0].name);
    check('a model\'s tags as chips', JSON.stringify(tagCells[0]) === JSON.stringify(tagged[0].tags.map(String)), tagCells);
  }

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
  await page.waitForSelector('#card');
  const cardApi = await api('/v1/models/acme/tiny/versions/1/card');
  check('the card API: front matter as JSON, not in the HTML',
    cardApi.card_data && cardApi.card_data.license === 'apache-2.0' && !cardApi.html.includes('apache-2.0'), cardApi.card_data);
  check('the card API: no raw HTML, no javascript: link',
    !/<script|<iframe|<style|onerror|javascript:|vbscript:|data:text/i.test(cardApi.html), cardApi.html);
  check('the card is rendered Markdown', (await page.textContent('#card h1')) === 'Tiny card' &&
    (await page.textContent('#card strong')) === 'bold' && (await page.textContent('#card pre code')).includes('print("code")'));
  const chips = await page.$$eval('#card-chips .pill', ps => ps.map(p => p.textContent));
  check('license and tags as chips (the front matter is not text)',
    JSON.stringify(chips) === JSON.stringify(['license: apache-2.0', 'text-generation', '<b>tag</b>']) &&
    !(await page.textContent('#card')).includes('license:'), chips);
  const hostile = await page.evaluate(() => {
    const card = document.getElementById('card');
    return {
      scripts: document.querySelectorAll('main script, main iframe, main style, main object, main embed').length,
      handlers: Array.from(card.querySelectorAll('*')).filter(n => Array.from(n.attributes).some(a => a.name.startsWith('on'))).length,
      hrefs: Array.from(card.querySelectorAll('a')).map(a => a.getAttribute('href')),
      imgs: Array.from(card.querySelectorAll('img')).map(i => i.getAttribute('src')),
      blocked: card.querySelectorAll('.blocked-image').length,
      hidden: getComputedStyle(document.body).display,
    };
  });
  check('card: no script, iframe, style or event handler survives',
    hostile.scripts === 0 && hostile.handlers === 0 && hostile.hidden !== 'none', hostile);
  check('card: links only http(s), none javascript:/vbscript:/data:',
    hostile.hrefs.length > 0 && hostile.hrefs.every(h => /^https?:/.test(h)), hostile.hrefs);
  check('card: a relative link leads to the version\'s file',
    hostile.hrefs.includes(S + '/v1/models/acme/tiny/versions/1/files/config.json'), hostile.hrefs);
  check('card: images from elsewhere (and data:) are not loaded', hostile.imgs.length === 0 && hostile.blocked === 2, hostile);
  check('no stray "null" text in the card section', !(await page.textContent('#card-section')).includes('null'));
  check('card: external links get rel=noopener', await page.$eval('#card a[href^="https://example.org"]', a => a.rel.includes('noopener')));
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
  const dl = await page.$$eval('#files-table a.download', as => as.map(a => a.getAttribute('href')));
  check('a download link for every file', dl.length === files.length &&
    files.every(f => dl.includes('/v1/models/acme/tiny/versions/1/files/' + f.path)), dl);
  const got = await fetch(S + dl.find(h => h.endsWith('/config.json')));
  check('a download link serves the file', got.status === 200 && (await got.text()).includes('hidden_size'));
  const allTensors = (await api('/v1/models/acme/tiny/versions/1/tensors')).tensors;
  const groups = await page.$$eval('#tensor-groups details', ds => ds.map(d => ({
    prefix: d.dataset.prefix, names: Array.from(d.querySelectorAll('tbody tr')).map(tr => tr.dataset.name),
    sizes: Array.from(d.querySelectorAll('td[data-bytes]')).map(td => td.dataset.bytes) })));
  const prefixes = groups.map(g => g.prefix);
  check('tensors grouped by layer across both shards',
    ['model.layers.0', 'model.layers.1', 'model.layers.2'].every(p => prefixes.includes(p)) &&
    groups.find(g => g.prefix === 'model.layers.1').names.length === 2, prefixes);
  check('every tensor of the version in one group, with its size',
    groups.reduce((n, g) => n + g.names.length, 0) === allTensors.length && allTensors.every(t => groups.some(g =>
      g.names.includes(t.name) && g.sizes[g.names.indexOf(t.name)] === String(t.data_offsets[1] - t.data_offsets[0]))),
    { groups, allTensors });
  await page.fill('#tensor-filter', 'layers.1.b');
  const visible = await page.$$eval('#tensor-groups details', ds => ds.filter(d => !d.hidden).map(d => ({
    prefix: d.dataset.prefix, open: d.open,
    rows: Array.from(d.querySelectorAll('tbody tr')).filter(tr => !tr.hidden).map(tr => tr.dataset.name) })));
  check('the filter box leaves the matching tensor only', visible.length === 1 && visible[0].open &&
    JSON.stringify(visible[0].rows) === JSON.stringify(['model.layers.1.bias']), visible);
  await shot(page, '3-version');

  // --- a JSON file as text, and the card's truncation on a huge card
  await open(page, '#/acme/tiny@1/config.json');
  const text = await page.textContent('#text-view');
  check('a JSON file is shown pretty-printed as text', text === JSON.stringify({ hidden_size: 4 }, null, 2), text);
  check('with a download link', (await page.$('#text-size a.download')) !== null);
  await open(page, '#/acme/tiny@1/README.md');
  check('the card file itself is shown as text, inert',
    (await page.textContent('#text-view')).includes("<script>alert('card')</script>") &&
    (await page.$$('main script')).length === 0);
  await open(page, '#/acme/huge');
  await page.waitForSelector('#card');
  check('a huge card: its start, marked truncated', (await page.$('#card-truncated')) !== null &&
    (await page.$$('#card em')).length > 1000 && (await page.$$('#card a')).length === 0 &&
    (await page.$$('main script')).length === 0);
  await shot(page, '3b-huge');

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
  check('refusals: one row per refusal (newest 50)', rej.length > 50 && rrows.length === 50, { n: rrows.length });
  check('the refused pickle is listed with its reason',
    rrows.some(r => r[2] === rej[0].path && r[3] === rej[0].reason && r[4] === 'pickle'), rrows);
  check('a refusal shows its size and the SHA-256 of its bytes',
    rrows.some(r => r[6] === String(rej[0].size) && r[7] === (rej[0].sha256 || '')), rrows);
  check('refusals come in pages of 50', rrows.length === 50 && (await page.$eval('#rej-prev', b => b.disabled)));
  const allRej = [];
  for (let cursor = null; ;) {
    const pg = await api('/v1/rejections?limit=1000' + (cursor ? '&cursor=' + cursor : ''), ADMIN);
    allRej.push(...pg.rejections);
    cursor = pg.next_cursor;
    if (!cursor) break;
  }
  async function submit(sel) {
    const b = await page.evaluate(() => document.body.dataset.ready || '');
    await page.click(sel);
    await page.waitForFunction(x => (document.body.dataset.ready || '') !== x, b);
  }
  await submit('#rej-next');
  const page2 = await page.$$eval('#rejections-table tbody tr', trs => trs.map(tr => tr.dataset.id));
  check('older: the next page continues the list', JSON.stringify(page2) ===
    JSON.stringify(allRej.slice(50, 100).map(r => String(r.id))), { page2 });
  await submit('#rej-prev');
  check('newer: back to the first page', (await page.$$eval('#rejections-table tbody tr', trs => trs[0].dataset.id)) === String(allRej[0].id));
  await page.fill('#rej-sha256', allRej[0].sha256.toUpperCase());
  await submit('#rej-apply');
  let fr = await rows(page, 'rejections-table');
  check('filter by sha256', fr.length === Math.min(50, allRej.filter(r => r.sha256 === allRej[0].sha256).length) &&
    fr.every(r => r[7] === allRej[0].sha256), fr.length);
  await page.fill('#rej-sha256', '');
  await page.fill('#rej-reason', 'payload_too_large');
  await submit('#rej-apply');
  check('filter by reason: none of another reason', (await page.$('#no-rejections')) !== null);
  await page.fill('#rej-reason', allRej[0].reason);
  await page.fill('#rej-namespace', 'acme');
  await submit('#rej-apply');
  fr = await rows(page, 'rejections-table');
  check('filter by reason and namespace', fr.length === 50 && fr.every(r => r[3] === allRej[0].reason));
  await page.fill('#rej-namespace', 'nobody');
  await submit('#rej-apply');
  check('filter by another namespace: none', (await page.$('#no-rejections')) !== null);
  await page.fill('#rej-namespace', '');
  await page.fill('#rej-since', '2099-01-01T00:00:00');
  await submit('#rej-apply');
  check('filter by time: none since 2099', (await page.$('#no-rejections')) !== null);
  await page.fill('#rej-since', '2000-01-01T00:00:00');
  await page.fill('#rej-until', '2099-01-01T00:00:00');
  await submit('#rej-apply');
  check('filter by time range: all in 2000..2099', (await rows(page, 'rejections-table')).length === 50);
  await page.fill('#rej-reason', 'Bad Reason!');
  await submit('#rej-apply');
  const rejErr = await page.textContent('#rej-error').catch(() => null);
  check('an invalid filter shows the API reason', rejErr && rejErr.includes('invalid'), rejErr);
  // code admitted by acme's code policy: recorded (outcome admitted_by_policy) and
  // badged; the two records are the oldest, so a filter brings them to the first page
  await page.fill('#rej-reason', 'code_python');
  await page.fill('#rej-namespace', 'acme');
  await page.fill('#rej-since', '');
  await page.fill('#rej-until', '');
  await submit('#rej-apply');
  check('code admitted by the policy is listed, marked as admitted',
    allRej.filter(r => r.outcome === 'admitted_by_policy').length === 2 &&
      (await rows(page, 'rejections-table')).length === 1 &&
      (await page.$$('#rejections-table .badge.code')).length === 1, allRej.length);
  check('the token is not in the URL', !page.url().includes(ADMIN));
  check('the token is in sessionStorage only', await page.evaluate(t =>
    sessionStorage.getItem('tensorgate.token') === t && localStorage.length === 0, ADMIN));
  await shot(page, '5-refusals');

  // --- a version that holds code (admitted by acme's code policy) is marked
  await open(page, '#/');
  await page.waitForSelector('#models-table');
  await page.fill('#search', 'coded');
  await page.waitForFunction(() => document.querySelectorAll('#models-table tbody tr').length === 1);
  const codedRow = await page.$('#models-table tr[data-name="acme/coded"] .badge.code');
  await page.fill('#search', 'tin');
  await page.waitForFunction(() => document.querySelectorAll('#models-table tbody tr').length === 1);
  const plainRow = await page.$('#models-table tr[data-name="acme/tiny"] .badge.code');
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

  check('no console errors (the 404 of the unknown model and the 400 of the bad filter aside)',
    consoleErrors.filter(e => !/status of (404|400)/.test(e)).length === 0, consoleErrors);
  check('no dialog was opened (the markup stayed inert)', dialogs.length === 0, dialogs);
  const csp = await page.evaluate(() => window.__csp);
  check('no Content-Security-Policy violation', csp.length === 0 &&
    !consoleErrors.some(e => /Content Security Policy/i.test(e)), { csp, consoleErrors });
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
