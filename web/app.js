// tensorgate's web page: one page, hash routes, the JSON API only (openapi.yaml).
//   #/                              models, with search
//   #/ORG/NAME                      a model: its card, versions and aliases
//   #/ORG/NAME@REV                  a version: its files (kind, size, SHA-256, verdict,
//                                   download), its card, its tensors by layer
//   #/ORG/NAME@REV/PATH             a safetensors or GGUF file: the tensor table; a JSON or
//                                   text file: its first 256 KiB, as text
//   #/rejections                    the record of refusals (admin token)
// Every catalog string is rendered with textContent (el() below), never as HTML.
// The token is kept in sessionStorage and sent as a bearer token, never in a URL.
'use strict';

const main = document.getElementById('main');
const crumbs = document.getElementById('crumbs');
const TOKEN_KEY = 'tensorgate.token';

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

// el('td', {className: 'num'}, 'text', childNode, ...): a DOM element whose text
// children are text nodes (inert whatever they hold).
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === 'dataset') Object.assign(node.dataset, v);
    else node[k] = v;
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return node;
}

function link(text, hash) {
  return el('a', {href: '#' + hash}, text);
}

function enc(s) {
  return encodeURIComponent(s);
}

function encPath(p) {
  return p.split('/').map(encodeURIComponent).join('/');
}

function bytes(n) {
  if (n < 1024) return n + ' B';
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = -1;
  do { v /= 1024; i++; } while (v >= 1024 && i < units.length - 1);
  return v.toFixed(v < 10 ? 2 : 1) + ' ' + units[i];
}

function count(n) {
  return Number(n).toLocaleString('en-US');
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.detail) || ('HTTP ' + status));
    this.status = status;
    this.reason = body && body.reason;
  }
}

async function api(path) {
  const headers = {Accept: 'application/json'};
  if (token()) headers.Authorization = 'Bearer ' + token();
  const r = await fetch(path, {headers, cache: 'no-store'});
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  if (!r.ok) throw new ApiError(r.status, body);
  return body;
}

function setCrumbs(parts) {
  crumbs.replaceChildren();
  parts.forEach((p, i) => {
    if (i) crumbs.appendChild(document.createTextNode(' / '));
    crumbs.appendChild(p.hash !== undefined ? link(p.text, p.hash) : el('span', {}, p.text));
  });
}

function showError(e) {
  main.replaceChildren(el('p', {className: 'error', id: 'error'},
    (e.reason ? e.reason + ': ' : '') + e.message));
}

function table(head, rows, id) {
  const thead = el('thead', {}, el('tr', {}, ...head.map(h =>
    el('th', {className: h.num ? 'num' : ''}, h.text || h))));
  const tbody = el('tbody', {}, ...rows);
  return el('table', {id}, thead, tbody);
}

function cell(text, cls) {
  return el('td', {className: cls || ''}, text);
}

// ---- #/ : models with search, sorting and paging (hubModelList below)
async function viewModels(query) {
  setCrumbs([{text: 'models'}]);
  await hubModelList(query);
}

// ---- #/ORG/NAME : versions and aliases, and the card of the newest version
async function viewModel(model) {
  setCrumbs([{text: 'models', hash: '/'}, {text: model}]);
  const m = await api('/v1/models/' + model.split('/').map(enc).join('/'));
  const aliases = Object.entries(m.aliases || {}).sort();
  const byNumber = {};
  for (const [a, n] of aliases) (byNumber[n] = byNumber[n] || []).push(a);
  const versions = (m.versions || []).slice().sort((a, b) => b.version - a.version);
  const card = el('section', {id: 'card-section'});
  main.replaceChildren(
    el('h1', {id: 'model-name'}, m.name),
    hubModelBadges(m),
    el('p', {id: 'model-description'}, m.description || ''),
    card,
    el('h2', {}, 'Versions'),
    table(['version', 'state', 'aliases', 'created', 'published', 'digest'], versions.map(v =>
      el('tr', {dataset: {version: String(v.version)}},
        el('td', {}, link(String(v.version), '/' + model + '@' + v.version)),
        el('td', {className: v.state === 'published' ? 'ok' : 'muted'}, v.state,
          ...(v.holds_code ? [' ', codeBadge('this version holds code')] : []),
          ...(v.deprecated ? [' ', deprecatedBadge(v)] : [])),
        el('td', {}, ...(byNumber[v.version] || []).map(a => el('span', {className: 'pill'}, a))),
        cell(v.created_at || '', 'muted'), cell(v.published_at || '', 'muted'),
        cell(v.digest ? v.digest.slice(0, 16) + '…' : '', 'mono'))), 'versions-table'),
    el('h2', {}, 'Aliases'),
    aliases.length === 0 ? el('p', {className: 'muted'}, 'No aliases.') :
      table(['alias', 'version'], aliases.map(([a, n]) =>
        el('tr', {}, cell(a), el('td', {}, link(String(n), '/' + model + '@' + n)))), 'aliases-table'));
  const shown = versions.find(v => v.state === 'published') || versions[0];
  if (shown) await hubCard(card, model, String(shown.version));
}

// The mark of a version that holds code its namespace's policy admitted
// (docs/DESIGN.md, "The code policy"): derived from its files by the server.
function codeBadge(title) {
  return el('span', {className: 'badge code', title: title}, 'code');
}

// A deprecated version (still readable; latest skips it), with its reason as the title.
function deprecatedBadge(v) {
  return el('span', {className: 'badge deprecated', title: 'deprecated ' + (v.deprecated_at || '') +
    (v.deprecation_reason ? ': ' + v.deprecation_reason : '')}, 'deprecated');
}

function versionBase(model, rev) {
  return '/v1/models/' + model.split('/').map(enc).join('/') + '/versions/' + enc(rev);
}

// ---- #/ORG/NAME@REV : files
async function viewVersion(model, rev) {
  setCrumbs([{text: 'models', hash: '/'}, {text: model, hash: '/' + model}, {text: '@' + rev}]);
  const v = await api(versionBase(model, rev));
  let files = [];
  let cursor = null;
  do {
    const page = await api(versionBase(model, rev) + '/files?limit=1000' + (cursor ? '&cursor=' + enc(cursor) : ''));
    files = files.concat(page.files || []);
    cursor = page.next_cursor;
  } while (cursor && files.length < 20000);
  const base = '/' + model + '@' + v.version;
  const card = el('section', {id: 'card-section'});
  const tensors = el('section', {id: 'tensor-section'});
  main.replaceChildren(
    el('h1', {}, model + ' @ ' + v.version),
    ...(v.holds_code ? [el('p', {id: 'code-warning', className: 'warn'}, codeBadge('this version holds code'),
      ' This version holds code that a loader may run: ' + v.code_files.map(c => c.path + ' (' + c.reason + ')').join(', ') + '.')] : []),
    ...(v.deprecated ? [el('p', {id: 'deprecated-warning', className: 'warn'}, deprecatedBadge(v),
      ' This version is deprecated' + (v.deprecation_reason ? ': ' + v.deprecation_reason : '') + '.')] : []),
    el('p', {className: 'muted'}, v.state + (v.published_at ? ', published ' + v.published_at : '') +
      (v.derived_from ? ', derived from version ' + v.derived_from : '') + (v.dtype ? ' (' + v.dtype + ')' : ''),
      v.deprecated ? el('span', {className: 'pill warn deprecated'}, 'deprecated') : null),
    table(['file', 'kind', {text: 'size', num: true}, 'SHA-256', 'verdict', {text: 'parameters', num: true}, ''],
      files.map(f => el('tr', {dataset: {path: f.path}},
        el('td', {}, link(f.path, base + '/' + f.path)),
        f.kind === 'code' ? el('td', {className: 'kind'}, codeBadge(f.code), ' ' + f.code) : cell(f.kind),
        el('td', {className: 'num', title: f.size + ' bytes', dataset: {bytes: String(f.size)}}, bytes(f.size)),
        cell(f.sha256, 'mono'),
        cell(verdict(f), f.nan || f.inf ? 'bad' : 'ok'),
        cell(f.parameters !== undefined ? count(f.parameters) : '', 'num'),
        el('td', {}, hubDownloadLink(model, String(v.version), f.path)))), 'files-table'),
    card, tensors);
  if (files.some(f => f.path === 'README.md')) await hubCard(card, model, String(v.version));
  if (files.some(f => f.kind === 'safetensors')) await hubTensorGroups(tensors, model, String(v.version));
}

// Every stored file passed the gate; what it is, and non-finite values it holds.
function verdict(f) {
  let text = 'accepted: ' + f.kind;
  if (f.kind === 'code') text = 'admitted as code by the namespace policy (' + f.code + ')';
  if (f.nan || f.inf) text += ' (' + (f.nan || 0) + ' NaN, ' + (f.inf || 0) + ' Inf)';
  return text;
}

// ---- #/ORG/NAME@REV/PATH : the tensor table of a safetensors file
async function viewFile(model, rev, path) {
  setCrumbs([{text: 'models', hash: '/'}, {text: model, hash: '/' + model},
    {text: '@' + rev, hash: '/' + model + '@' + rev}, {text: path}]);
  const h = await api(versionBase(model, rev) + '/files/' + encPath(path) + '/header');
  if (h.format === 'gguf') return viewGguf(path, h);
  const tensors = h.tensors || [];
  const per = Object.entries(h.parameters || {}).sort((a, b) => b[1] - a[1]);
  const total = h.parameters_total !== undefined ? h.parameters_total : per.reduce((s, x) => s + x[1], 0);
  const meta = Object.entries(h.metadata || {});
  main.replaceChildren(
    el('h1', {}, path),
    el('p', {className: 'muted'}, bytes(h.size) + ', header ' + bytes(h.header_size) + ', ' +
      count(tensors.length) + ' tensors, sha256 ', el('code', {}, h.sha256)),
    el('h2', {}, 'Parameters'),
    table(['dtype', {text: 'parameters', num: true}, {text: 'share', num: true}],
      per.map(([d, n]) => el('tr', {dataset: {dtype: d}}, cell(d), cell(count(n), 'num'),
        cell(total ? (100 * n / total).toFixed(1) + ' %' : '', 'num')))
        .concat([el('tr', {id: 'parameters-total'}, el('th', {}, 'total'), el('th', {className: 'num'}, count(total)),
          el('th', {className: 'num'}, (h.nan_total || 0) + ' NaN, ' + (h.inf_total || 0) + ' Inf'))]),
      'dtype-table'),
    meta.length ? el('h2', {}, 'Metadata') : null,
    meta.length ? table(['key', 'value'], meta.map(([k, v]) => el('tr', {}, cell(k, 'mono'), cell(String(v), 'mono'))), 'metadata-table') : null,
    el('h2', {}, 'Tensors'),
    table(['name', 'dtype', 'shape', {text: 'parameters', num: true}, {text: 'NaN', num: true}, {text: 'Inf', num: true}],
      tensors.map(t => {
        const n = t.shape.reduce((a, b) => a * b, 1);
        return el('tr', {dataset: {name: t.name}}, cell(t.name, 'mono'), cell(t.dtype),
          cell('[' + t.shape.join(', ') + ']', 'mono'), cell(count(n), 'num'),
          cell(t.nan !== undefined ? String(t.nan) : '', t.nan ? 'num bad' : 'num'),
          cell(t.inf !== undefined ? String(t.inf) : '', t.inf ? 'num bad' : 'num'));
      }), 'tensors-table'));
}

// A GGUF metadata value as text: an array as its element type, length and first
// elements (the server sends only the first few), a cut string with its length.
function ggufValue(v) {
  if (v.type === 'array') {
    return v.element_type + '[' + count(v.length) + ']: ' + JSON.stringify(v.value) + (v.truncated ? ' …' : '');
  }
  const text = typeof v.value === 'string' ? v.value : JSON.stringify(v.value);
  return v.truncated ? text + ' … (' + count(v.length) + ' bytes)' : text;
}

// ---- #/ORG/NAME@REV/PATH of a GGUF file: its metadata and tensor table
function viewGguf(path, h) {
  const tensors = h.tensors || [];
  const per = Object.entries(h.parameters || {}).sort((a, b) => b[1] - a[1]);
  const total = h.parameters_total || 0;
  const meta = Object.entries(h.metadata || {});
  main.replaceChildren(
    el('h1', {}, path),
    el('p', {className: 'muted', id: 'gguf-summary'}, 'GGUF v' + h.version + ', ' + h.architecture + ', ' +
      bytes(h.size) + ', alignment ' + h.alignment + ', data at byte ' + count(h.data_start) + ', ' +
      count(tensors.length) + ' tensors, sha256 ', el('code', {}, h.sha256)),
    el('h2', {}, 'Parameters'),
    table(['type', {text: 'parameters', num: true}, {text: 'share', num: true}],
      per.map(([d, n]) => el('tr', {dataset: {dtype: d}}, cell(d), cell(count(n), 'num'),
        cell(total ? (100 * n / total).toFixed(1) + ' %' : '', 'num')))
        .concat([el('tr', {id: 'parameters-total'}, el('th', {}, 'total'), el('th', {className: 'num'}, count(total)),
          el('th', {}, ''))]), 'dtype-table'),
    el('h2', {}, 'Metadata'),
    table(['key', 'type', 'value'], meta.map(([k, v]) => el('tr', {dataset: {key: k}}, cell(k, 'mono'),
      cell(v.type === 'array' ? 'array of ' + v.element_type : v.type), cell(ggufValue(v), 'mono'))), 'metadata-table'),
    el('h2', {}, 'Tensors'),
    el('p', {className: 'muted'}, 'Shapes are row-major (NumPy, PyTorch): GGUF\'s dimensions reversed.'),
    table(['name', 'type', 'shape', {text: 'parameters', num: true}, {text: 'offset', num: true}, {text: 'bytes', num: true}],
      tensors.map(t => el('tr', {dataset: {name: t.name}}, cell(t.name, 'mono'), cell(t.dtype),
        cell('[' + t.shape.join(', ') + ']', 'mono'), cell(count(t.shape.reduce((a, b) => a * b, 1)), 'num'),
        cell(count(t.offset), 'num'), cell(count(t.size), 'num'))), 'tensors-table'));
}

// ---- #/rejections : refused uploads (admin scope), filtered and paged (hubRejections)
async function viewRejections() {
  setCrumbs([{text: 'refusals'}]);
  if (!token()) {
    main.replaceChildren(el('h1', {}, 'Refusals'),
      el('p', {className: 'muted', id: 'need-token'}, 'The record of refusals needs an admin token: enter it above.'));
    return;
  }
  await hubRejections();
}

// ==== the hub page's parts (model list paging/sorting, card, text files, downloads,
// tensor groups, filtered refusals). Fields other parts of the API may add (tags,
// downloads, deprecated, updated_at) are shown when the JSON has them.

const HUB_PAGE = 25;                 // models a page
const HUB_TEXT_MAX = 256 * 1024;     // bytes of a text file shown
const HUB_REJECTIONS_PAGE = 50;

// ---- the model list: search (server side), tag filter, sort and pages (client side)
async function hubModelList(query) {
  const search = el('input', {type: 'search', id: 'search', placeholder: 'search models', value: query || ''});
  const sort = el('select', {id: 'sort', title: 'sort by'},
    el('option', {value: 'name'}, 'name'), el('option', {value: 'updated'}, 'last update'));
  const tagSel = el('select', {id: 'tag-filter', title: 'tag', hidden: true}, el('option', {value: ''}, 'any tag'));
  const list = el('div', {id: 'models'});
  const pager = el('nav', {id: 'models-pager', className: 'pager'});
  main.replaceChildren(el('h1', {}, 'Models'), el('div', {className: 'controls'}, search, sort, tagSel), list, pager);
  let models = [];
  let pageNo = 0;
  let pending = 0;
  const updated = m => m.updated_at || m.last_modified || m.created_at || '';
  function render() {
    const tag = tagSel.value;
    let shown = tag ? models.filter(m => Array.isArray(m.tags) && m.tags.includes(tag)) : models.slice();
    const key = sort.value;
    if (key === 'name') shown.sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    else if (key === 'updated') shown.sort((a, b) => updated(b) < updated(a) ? -1 : updated(b) > updated(a) ? 1 : 0);
    else if (key === 'downloads') shown.sort((a, b) => (b.downloads || 0) - (a.downloads || 0));
    const pages = Math.max(1, Math.ceil(shown.length / HUB_PAGE));
    if (pageNo >= pages) pageNo = pages - 1;
    const slice = shown.slice(pageNo * HUB_PAGE, (pageNo + 1) * HUB_PAGE);
    const withDownloads = models.some(m => typeof m.downloads === 'number');
    const head = ['model', 'description', 'tags', 'updated'];
    if (withDownloads) head.push({text: 'downloads', num: true});
    list.replaceChildren(shown.length === 0 ? el('p', {className: 'muted', id: 'no-models'}, 'No models.') :
      table(head, slice.map(m => el('tr', {dataset: {name: m.name}},
        el('td', {}, link(m.name, '/' + m.name),
          m.deprecated ? el('span', {className: 'pill warn deprecated'}, 'deprecated') : null),
        el('td', {}, ...(m.holds_code ? [codeBadge('code in version ' + (m.code_versions || []).join(', ')), ' '] : []), m.description || ''),
        el('td', {className: 'tags'}, ...(Array.isArray(m.tags) ? m.tags : []).map(t => el('span', {className: 'pill tag'}, String(t)))),
        cell(updated(m), 'muted'),
        withDownloads ? cell(typeof m.downloads === 'number' ? count(m.downloads) : '', 'num downloads') : null)),
      'models-table'));
    const prev = el('button', {type: 'button', id: 'page-prev', disabled: pageNo === 0}, '‹ previous');
    const next = el('button', {type: 'button', id: 'page-next', disabled: pageNo >= pages - 1}, 'next ›');
    prev.addEventListener('click', () => { pageNo--; render(); });
    next.addEventListener('click', () => { pageNo++; render(); });
    pager.replaceChildren(prev, el('span', {id: 'page-info'}, ' page ' + (pageNo + 1) + ' of ' + pages +
      ' (' + count(shown.length) + ' models) '), next);
  }
  async function load() {
    const mine = ++pending;
    const q = search.value.trim();
    let got = [];
    let cursor = null;
    try {
      do {
        const page = await api('/v1/models?limit=200' + (q ? '&q=' + enc(q) : '') +
          (cursor ? '&cursor=' + enc(cursor) : ''));
        got = got.concat(page.models || []);
        cursor = page.next_cursor;
      } while (cursor && got.length < 5000);
    } catch (e) {
      if (mine === pending) list.replaceChildren(el('p', {className: 'error'}, e.message));
      return;
    }
    if (mine !== pending) return;
    models = got;
    pageNo = 0;
    if (models.some(m => typeof m.downloads === 'number') && !sort.querySelector('option[value=downloads]'))
      sort.appendChild(el('option', {value: 'downloads'}, 'downloads'));
    const tags = [...new Set(models.flatMap(m => Array.isArray(m.tags) ? m.tags.map(String) : []))].sort();
    const keep = tagSel.value;
    tagSel.replaceChildren(el('option', {value: ''}, 'any tag'), ...tags.map(t => el('option', {value: t}, t)));
    tagSel.value = tags.includes(keep) ? keep : '';
    tagSel.hidden = tags.length === 0;
    render();
  }
  search.addEventListener('input', load);
  sort.addEventListener('change', () => { pageNo = 0; render(); });
  tagSel.addEventListener('change', () => { pageNo = 0; render(); });
  await load();
}

// chips of what the model's JSON says about it beyond name and description
function hubModelBadges(m) {
  const chips = [];
  if (m.deprecated) chips.push(el('span', {className: 'pill warn deprecated', id: 'model-deprecated'},
    'deprecated' + (typeof m.deprecated === 'string' ? ': ' + m.deprecated : '')));
  for (const t of Array.isArray(m.tags) ? m.tags : []) chips.push(el('span', {className: 'pill tag'}, String(t)));
  if (typeof m.downloads === 'number') chips.push(el('span', {className: 'pill', id: 'model-downloads'}, count(m.downloads) + ' downloads'));
  return el('p', {id: 'model-badges'}, ...chips);
}

// ---- the model card: GET .../versions/REV/card, libcmark's safe HTML, allow-listed again here
async function hubCard(into, model, rev) {
  let c;
  try {
    c = await api(versionBase(model, rev) + '/card');
  } catch (e) {
    if (e.status === 404) return; // no README.md
    into.replaceChildren(el('p', {className: 'error'}, 'model card: ' + e.message));
    return;
  }
  const data = c.card_data && typeof c.card_data === 'object' ? c.card_data : {};
  const chips = [];
  const list = v => (Array.isArray(v) ? v : v === undefined || v === null ? [] : [v]).map(String);
  for (const l of list(data.license)) chips.push(el('span', {className: 'pill license'}, 'license: ' + l));
  for (const t of list(data.tags)) chips.push(el('span', {className: 'pill tag'}, t));
  const body = el('article', {id: 'card', className: 'card'});
  body.append(...hubSafeNodes(c.html || '', versionBase(model, rev) + '/files/'));
  into.replaceChildren(...[el('h2', {}, 'Model card (version ' + c.version + ')'),
    el('p', {id: 'card-chips'}, ...chips),
    c.truncated ? el('p', {className: 'muted', id: 'card-truncated'}, 'The card is longer than 128 KiB: its start is shown.') : null,
    body].filter(Boolean));
}

const HUB_TAGS = new Set(['h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'p', 'em', 'strong', 'code', 'pre', 'blockquote',
  'ul', 'ol', 'li', 'a', 'img', 'hr', 'br', 'del', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'sup', 'sub']);
const HUB_DROP = new Set(['script', 'style', 'iframe', 'object', 'embed', 'template', 'noscript', 'svg', 'math', 'form']);

// A URL of the card: relative ones are files of the version; kept only when http(s)
// (links also mailto:); images only from this origin. Returns null to drop it.
function hubSafeUrl(raw, filesBase, image) {
  if (typeof raw !== 'string' || raw === '') return null;
  if (!image && raw.startsWith('#')) return raw;
  let u;
  try { u = new URL(raw, location.origin + filesBase); } catch (e) { return null; }
  if (image) return (u.protocol === 'http:' || u.protocol === 'https:') && u.origin === location.origin ? u.href : null;
  return u.protocol === 'http:' || u.protocol === 'https:' || u.protocol === 'mailto:' ? u.href : null;
}

// The server's HTML, parsed inertly (DOMParser runs no script, loads nothing) and
// rebuilt from allow-listed elements and attributes; anything else keeps only its text.
function hubSafeNodes(html, filesBase) {
  const doc = new DOMParser().parseFromString('<body>' + html, 'text/html');
  const out = [];
  let nodes = 0;
  function copy(src) {
    if (++nodes > 200000) return null;
    if (src.nodeType === Node.TEXT_NODE) return document.createTextNode(src.nodeValue);
    if (src.nodeType !== Node.ELEMENT_NODE) return null;
    const tag = src.localName;
    if (HUB_DROP.has(tag)) return null;
    const kids = Array.from(src.childNodes).map(copy).filter(Boolean);
    if (!HUB_TAGS.has(tag)) {
      const frag = document.createDocumentFragment();
      frag.append(...kids);
      return frag;
    }
    let node;
    if (tag === 'a') {
      const href = hubSafeUrl(src.getAttribute('href'), filesBase, false);
      node = document.createElement(href ? 'a' : 'span');
      if (href) {
        node.setAttribute('href', href);
        if (!href.startsWith('#')) node.rel = 'noopener noreferrer nofollow';
      }
    } else if (tag === 'img') {
      const url = hubSafeUrl(src.getAttribute('src'), filesBase, true);
      const alt = src.getAttribute('alt') || '';
      if (!url) return el('span', {className: 'muted blocked-image'}, '[image not from this registry' + (alt ? ': ' + alt : '') + ']');
      node = document.createElement('img');
      node.setAttribute('src', url);
      node.alt = alt;
    } else {
      node = document.createElement(tag);
      if (tag === 'ol' && /^\d{1,9}$/.test(src.getAttribute('start') || '')) node.setAttribute('start', src.getAttribute('start'));
      if (tag === 'code' && /^language-[\w+.-]{1,40}$/.test(src.getAttribute('class') || '')) node.className = src.getAttribute('class');
    }
    const title = src.getAttribute('title');
    if (title && (tag === 'a' || tag === 'img')) node.title = title;
    node.append(...kids);
    return node;
  }
  for (const n of Array.from(doc.body.childNodes)) {
    const c = copy(n);
    if (c) out.push(c);
  }
  return out;
}

// ---- downloads: a plain link; with a token, fetched with it and saved from a blob
function hubDownloadLink(model, rev, path) {
  const href = versionBase(model, rev) + '/files/' + encPath(path);
  const a = el('a', {href, className: 'download', download: path.split('/').pop()}, 'download');
  a.addEventListener('click', async ev => {
    if (!token()) return;
    ev.preventDefault();
    const r = await fetch(href, {headers: {Authorization: 'Bearer ' + token()}});
    if (!r.ok) { alertInline(a, 'HTTP ' + r.status); return; }
    const url = URL.createObjectURL(await r.blob());
    const tmp = el('a', {href: url, download: a.download});
    document.body.appendChild(tmp);
    tmp.click();
    tmp.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  });
  return a;
}

function alertInline(after, text) {
  after.after(el('span', {className: 'bad'}, ' ' + text));
}

// ---- #/ORG/NAME@REV/PATH for a file that is not safetensors/GGUF: its text, bounded
function hubIsTextPath(p) {
  return !/\.(safetensors|gguf)$/i.test(p);
}

async function hubViewText(model, rev, path) {
  setCrumbs([{text: 'models', hash: '/'}, {text: model, hash: '/' + model},
    {text: '@' + rev, hash: '/' + model + '@' + rev}, {text: path}]);
  const headers = {Range: 'bytes=0-' + (HUB_TEXT_MAX - 1)};
  if (token()) headers.Authorization = 'Bearer ' + token();
  const r = await fetch(versionBase(model, rev) + '/files/' + encPath(path), {headers, cache: 'no-store'});
  if (!r.ok) {
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    throw new ApiError(r.status, body);
  }
  const buf = new Uint8Array(await r.arrayBuffer());
  const range = r.headers.get('Content-Range');
  const total = range && /\/(\d+)$/.test(range) ? Number(/\/(\d+)$/.exec(range)[1]) : buf.length;
  const truncated = total > buf.length;
  const head = [el('h1', {}, path), el('p', {className: 'muted', id: 'text-size'},
    bytes(total) + (truncated ? ', the first ' + bytes(buf.length) + ' shown' : '') + ' · ',
    hubDownloadLink(model, rev, path))];
  if (buf.subarray(0, 8192).includes(0)) {
    main.replaceChildren(...head, el('p', {id: 'text-binary'}, 'A binary file: download it to read it.'));
    return;
  }
  let text = new TextDecoder('utf-8').decode(buf);
  if (!truncated && /\.json$/i.test(path)) {
    try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* shown as it is */ }
  }
  main.replaceChildren(...head, el('pre', {id: 'text-view', className: 'text'}, text));
}

// ---- tensors of a version across its shards, grouped by layer, with a filter
function hubTensorGroup(name) {
  const m = /^(.*?\.\d+)\./.exec(name);
  if (m) return m[1];
  const i = name.lastIndexOf('.');
  return i > 0 ? name.slice(0, i) : name;
}

const HUB_ITEM = {F64: 8, I64: 8, U64: 8, F32: 4, I32: 4, U32: 4, F16: 2, BF16: 2, I16: 2, U16: 2,
  F8_E4M3: 1, F8_E5M2: 1, I8: 1, U8: 1, BOOL: 1};

async function hubTensorGroups(into, model, rev) {
  let tensors = [];
  let cursor = null;
  try {
    do {
      const page = await api(versionBase(model, rev) + '/tensors?limit=10000' + (cursor ? '&cursor=' + enc(cursor) : ''));
      tensors = tensors.concat(page.tensors || []);
      cursor = page.next_cursor;
    } while (cursor && tensors.length < 200000);
  } catch (e) {
    into.replaceChildren(el('p', {className: 'error'}, 'tensors: ' + e.message));
    return;
  }
  const groups = new Map();
  for (const t of tensors) {
    const g = hubTensorGroup(t.name);
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g).push(t);
  }
  const filter = el('input', {type: 'search', id: 'tensor-filter', placeholder: 'filter tensors'});
  const shards = new Set(tensors.map(t => t.file)).size;
  const size = t => Array.isArray(t.data_offsets) ? t.data_offsets[1] - t.data_offsets[0] : 0;
  const box = el('div', {id: 'tensor-groups'}, ...[...groups].map(([g, ts]) => {
    const params = ts.reduce((s, t) => s + t.shape.reduce((a, b) => a * b, 1), 0);
    const total = ts.reduce((s, t) => s + size(t), 0);
    return el('details', {className: 'tensor-group', dataset: {prefix: g}},
      el('summary', {}, el('code', {}, g + (/\.\d+$/.test(g) ? '.*' : '')),
        el('span', {className: 'muted'}, ' ' + ts.length + ' tensors, ' + count(params) + ' parameters, ' + bytes(total))),
      table(['name', 'dtype', 'shape', {text: 'size', num: true}, 'file'], ts.map(t =>
        el('tr', {dataset: {name: t.name}}, cell(t.name, 'mono'), cell(t.dtype),
          cell('[' + t.shape.join(', ') + ']', 'mono'),
          el('td', {className: 'num', dataset: {bytes: String(size(t))}}, bytes(size(t))),
          el('td', {}, link(t.file, '/' + model + '@' + rev + '/' + t.file))))));
  }));
  filter.addEventListener('input', () => {
    const q = filter.value.trim().toLowerCase();
    for (const d of box.children) {
      let hits = 0;
      for (const tr of d.querySelectorAll('tbody tr')) {
        const hit = !q || tr.dataset.name.toLowerCase().includes(q);
        tr.hidden = !hit;
        if (hit) hits++;
      }
      d.hidden = hits === 0;
      d.open = q !== '' && hits > 0;
    }
  });
  into.replaceChildren(el('h2', {}, 'Tensors'),
    el('p', {className: 'muted', id: 'tensor-summary'}, count(tensors.length) + ' tensors in ' + shards +
      (shards === 1 ? ' file' : ' files') + ', ' + groups.size + ' groups'), filter, box);
}

// ---- refusals: filters (reason, namespace, time range, sha256) and cursor pages
async function hubRejections() {
  const field = (id, label, props) => el('label', {}, label + ' ', el('input', Object.assign({id}, props || {})));
  const form = el('form', {id: 'rej-filters', className: 'controls', autocomplete: 'off'},
    field('rej-reason', 'reason', {placeholder: 'refused_format'}),
    field('rej-namespace', 'namespace', {placeholder: 'org'}),
    field('rej-since', 'since', {type: 'datetime-local', step: 1}),
    field('rej-until', 'until', {type: 'datetime-local', step: 1}),
    field('rej-sha256', 'sha256', {placeholder: '64 hex digits', size: 30}),
    el('button', {type: 'submit', id: 'rej-apply'}, 'Filter'));
  const list = el('div', {id: 'rejections'});
  const pager = el('nav', {id: 'rej-pager', className: 'pager'});
  main.replaceChildren(el('h1', {}, 'Refusals'), form, list, pager);
  const cursors = [null]; // the cursor of each page seen; the last is the one shown
  const iso = v => v ? new Date(v).toISOString().replace(/\.\d+Z$/, 'Z') : '';
  function query() {
    const p = new URLSearchParams();
    const add = (k, v) => { if (v) p.set(k, v); };
    add('reason', form.querySelector('#rej-reason').value.trim());
    add('namespace', form.querySelector('#rej-namespace').value.trim());
    add('since', iso(form.querySelector('#rej-since').value));
    add('until', iso(form.querySelector('#rej-until').value));
    add('sha256', form.querySelector('#rej-sha256').value.trim().toLowerCase());
    p.set('limit', String(HUB_REJECTIONS_PAGE));
    return p;
  }
  async function load() {
    const p = query();
    const cur = cursors[cursors.length - 1];
    if (cur) p.set('cursor', cur);
    let page;
    try {
      page = await api('/v1/rejections?' + p.toString());
    } catch (e) {
      list.replaceChildren(el('p', {className: 'error', id: 'rej-error'}, (e.reason ? e.reason + ': ' : '') + e.message));
      pager.replaceChildren();
      return;
    }
    const rows = page.rejections || [];
    list.replaceChildren(rows.length === 0 ? el('p', {className: 'muted', id: 'no-rejections'}, 'No refusals.') :
      table(['when', 'model', 'path', 'reason', 'format', 'detail', 'size', 'sha256', 'token'], rows.map(r =>
        el('tr', {dataset: {id: String(r.id)}}, cell(r.time || '', 'muted'), cell((r.model || '') + (r.version ? '@' + r.version : '')),
          cell(r.path || '', 'mono'),
          // code a namespace's policy admitted is recorded here too, marked as such
          r.outcome === 'admitted_by_policy' ? el('td', {}, r.reason || '', ' ', codeBadge('admitted by the namespace policy'))
            : cell(r.reason || '', 'bad'),
          cell(r.format || ''), cell(r.detail || ''),
          cell(r.size == null ? '' : String(r.size)), cell(r.sha256 || '', 'mono'),
          cell(r.token_id == null ? '' : String(r.token_id))
        )), 'rejections-table'));
    const prev = el('button', {type: 'button', id: 'rej-prev', disabled: cursors.length === 1}, '‹ newer');
    const next = el('button', {type: 'button', id: 'rej-next', disabled: !page.next_cursor}, 'older ›');
    prev.addEventListener('click', async () => { cursors.pop(); await load(); done(); });
    next.addEventListener('click', async () => { cursors.push(page.next_cursor); await load(); done(); });
    pager.replaceChildren(prev, el('span', {id: 'rej-page'}, ' page ' + cursors.length + ' '), next);
  }
  function done() {
    document.body.dataset.ready = String(Date.now());
  }
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    cursors.length = 1;
    await load();
    done();
  });
  await load();
}

async function route() {
  const hash = decodeURIComponent(location.hash.replace(/^#/, '')) || '/';
  try {
    if (hash === '/' || hash === '') return await viewModels('');
    if (hash === '/rejections') return await viewRejections();
    const m = /^\/([^/@]+\/[^/@]+)(?:@([^/]+)(?:\/(.+))?)?$/.exec(hash);
    if (!m) throw new ApiError(404, {reason: 'not_found', detail: 'no page ' + hash});
    if (m[3]) return await (hubIsTextPath(m[3]) ? hubViewText : viewFile)(m[1], m[2], m[3]);
    if (m[2]) return await viewVersion(m[1], m[2]);
    return await viewModel(m[1]);
  } catch (e) {
    showError(e);
  } finally {
    document.body.dataset.ready = String(Date.now());
  }
}

document.getElementById('token-form').addEventListener('submit', ev => {
  ev.preventDefault();
  const input = document.getElementById('token');
  if (input.value) sessionStorage.setItem(TOKEN_KEY, input.value.trim());
  input.value = '';
  route();
});
document.getElementById('token-clear').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  route();
});
window.addEventListener('hashchange', route);
route();
