// tensorgate's web page: one page, hash routes, the JSON API only (openapi.yaml).
//   #/                              models, with search
//   #/ORG/NAME                      a model: versions and aliases
//   #/ORG/NAME@REV                  a version: its files (kind, size, SHA-256, verdict)
//   #/ORG/NAME@REV/PATH             a safetensors or GGUF file: the tensor table
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

// ---- #/ : models with search
async function viewModels(query) {
  setCrumbs([{text: 'models'}]);
  const search = el('input', {type: 'search', id: 'search', placeholder: 'search models', value: query || ''});
  const list = el('div', {id: 'models'});
  main.replaceChildren(el('h1', {}, 'Models'), search, list);
  let pending = 0;
  async function load() {
    const mine = ++pending;
    const q = search.value.trim();
    let models = [];
    let cursor = null;
    try {
      do {
        const page = await api('/v1/models?limit=200' + (q ? '&q=' + enc(q) : '') +
          (cursor ? '&cursor=' + enc(cursor) : ''));
        models = models.concat(page.models || []);
        cursor = page.next_cursor;
      } while (cursor && models.length < 2000);
    } catch (e) {
      if (mine === pending) list.replaceChildren(el('p', {className: 'error'}, e.message));
      return;
    }
    if (mine !== pending) return;
    list.replaceChildren(models.length === 0 ? el('p', {className: 'muted', id: 'no-models'}, 'No models.') :
      table(['model', 'description', 'created'], models.map(m =>
        el('tr', {dataset: {model: m.name}}, el('td', {}, link(m.name, '/' + m.name)),
          el('td', {}, ...(m.holds_code ? [codeBadge('code in version ' + m.code_versions.join(', ')), ' '] : []), m.description || ''),
          cell(m.created_at || '', 'muted'))), 'models-table'));
  }
  search.addEventListener('input', load);
  await load();
}

// ---- #/ORG/NAME : versions and aliases
async function viewModel(model) {
  setCrumbs([{text: 'models', hash: '/'}, {text: model}]);
  const m = await api('/v1/models/' + model.split('/').map(enc).join('/'));
  const aliases = Object.entries(m.aliases || {}).sort();
  const byNumber = {};
  for (const [a, n] of aliases) (byNumber[n] = byNumber[n] || []).push(a);
  const versions = (m.versions || []).slice().sort((a, b) => b.version - a.version);
  main.replaceChildren(
    el('h1', {id: 'model-name'}, m.name),
    el('p', {id: 'model-description'}, m.description || ''),
    el('h2', {}, 'Versions'),
    table(['version', 'state', 'aliases', 'created', 'published', 'digest'], versions.map(v =>
      el('tr', {dataset: {version: String(v.version)}},
        el('td', {}, link(String(v.version), '/' + model + '@' + v.version)),
        el('td', {className: v.state === 'published' ? 'ok' : 'muted'}, v.state, ...(v.holds_code ? [' ', codeBadge('this version holds code')] : []),
          ...(v.deprecated ? [' ', deprecatedBadge(v)] : [])),
        el('td', {}, ...(byNumber[v.version] || []).map(a => el('span', {className: 'pill'}, a))),
        cell(v.created_at || '', 'muted'), cell(v.published_at || '', 'muted'),
        cell(v.digest ? v.digest.slice(0, 16) + '…' : '', 'mono'))), 'versions-table'),
    el('h2', {}, 'Aliases'),
    aliases.length === 0 ? el('p', {className: 'muted'}, 'No aliases.') :
      table(['alias', 'version'], aliases.map(([a, n]) =>
        el('tr', {}, cell(a), el('td', {}, link(String(n), '/' + model + '@' + n)))), 'aliases-table'));
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
  main.replaceChildren(
    el('h1', {}, model + ' @ ' + v.version),
    ...(v.holds_code ? [el('p', {id: 'code-warning', className: 'warn'}, codeBadge('this version holds code'),
      ' This version holds code that a loader may run: ' + v.code_files.map(c => c.path + ' (' + c.reason + ')').join(', ') + '.')] : []),
    ...(v.deprecated ? [el('p', {id: 'deprecated-warning', className: 'warn'}, deprecatedBadge(v),
      ' This version is deprecated' + (v.deprecation_reason ? ': ' + v.deprecation_reason : '') + '.')] : []),
    el('p', {className: 'muted'}, v.state + (v.published_at ? ', published ' + v.published_at : '') +
      (v.derived_from ? ', derived from version ' + v.derived_from : '') + (v.dtype ? ' (' + v.dtype + ')' : '')),
    table(['file', 'kind', {text: 'size', num: true}, 'SHA-256', 'verdict', {text: 'parameters', num: true}],
      files.map(f => el('tr', {dataset: {path: f.path}},
        el('td', {}, f.kind === 'safetensors' || f.kind === 'gguf' ? link(f.path, '/' + model + '@' + v.version + '/' + f.path) : el('span', {}, f.path)),
        f.kind === 'code' ? el('td', {className: 'kind'}, codeBadge(f.code), ' ' + f.code) : cell(f.kind),
        el('td', {className: 'num', title: f.size + ' bytes', dataset: {bytes: String(f.size)}}, bytes(f.size)),
        cell(f.sha256, 'mono'),
        cell(verdict(f), f.nan || f.inf ? 'bad' : 'ok'),
        cell(f.parameters !== undefined ? count(f.parameters) : '', 'num'))), 'files-table'));
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

// ---- #/rejections : refused uploads (admin scope)
async function viewRejections() {
  setCrumbs([{text: 'refusals'}]);
  if (!token()) {
    main.replaceChildren(el('h1', {}, 'Refusals'),
      el('p', {className: 'muted', id: 'need-token'}, 'The record of refusals needs an admin token: enter it above.'));
    return;
  }
  const page = await api('/v1/rejections?limit=500');
  const rows = page.rejections || [];
  main.replaceChildren(el('h1', {}, 'Refusals'),
    rows.length === 0 ? el('p', {className: 'muted'}, 'No refusals.') :
      table(['when', 'model', 'path', 'reason', 'format', 'detail', 'size', 'sha256', 'token'], rows.map(r =>
        el('tr', {}, cell(r.time || '', 'muted'), cell((r.model || '') + (r.version ? '@' + r.version : '')),
          cell(r.path || '', 'mono'),
          // code a namespace's policy admitted is recorded here too, marked as such
          r.outcome === 'admitted_by_policy' ? el('td', {}, r.reason || '', ' ', codeBadge('admitted by the namespace policy'))
            : cell(r.reason || '', 'bad'),
          cell(r.format || ''), cell(r.detail || ''),
          cell(r.size == null ? '' : String(r.size)), cell(r.sha256 || '', 'mono'),
          cell(r.token_id == null ? '' : String(r.token_id))
        )), 'rejections-table'));
}

async function route() {
  const hash = decodeURIComponent(location.hash.replace(/^#/, '')) || '/';
  try {
    if (hash === '/' || hash === '') return await viewModels('');
    if (hash === '/rejections') return await viewRejections();
    const m = /^\/([^/@]+\/[^/@]+)(?:@([^/]+)(?:\/(.+))?)?$/.exec(hash);
    if (!m) throw new ApiError(404, {reason: 'not_found', detail: 'no page ' + hash});
    if (m[3]) return await viewFile(m[1], m[2], m[3]);
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
