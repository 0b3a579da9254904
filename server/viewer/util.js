// Small helpers: building elements (text only: nothing from the API is
// ever parsed as HTML) and formatting numbers, times and JSON.

// h builds an element: h('div', {class: 'x', onclick: fn}, child, 'text').
// Attributes named on* are listeners; "dataset" sets data-*; a null or
// false child is skipped, an array is spread.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// clear empties el and fills it with children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function fmtMs(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '–';
  if (ms === 0) return '0';
  if (ms < 1) return ms.toFixed(2) + ' ms';
  if (ms < 1000) return Math.round(ms) + ' ms';
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
  const m = Math.floor(ms / 60000);
  return m + ' min ' + Math.round((ms % 60000) / 1000) + ' s';
}

export function fmtInt(n) {
  if (n === null || n === undefined) return '–';
  return Number(n).toLocaleString('en-US');
}

// fmtCost shows dollars; null is a model without a price.
export function fmtCost(usd) {
  if (usd === null || usd === undefined) return 'unpriced';
  if (usd === 0) return '$0';
  if (usd < 0.01) return '$' + usd.toFixed(6).replace(/0+$/, '');
  return '$' + usd.toFixed(4);
}

export function fmtTime(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// relTime says how long ago iso was, coarsely.
export function relTime(iso, now = Date.now()) {
  const t = new Date(iso).getTime();
  if (Number.isNaN(t)) return '';
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 5) return 'just now';
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.floor(s / 60) + ' min ago';
  if (s < 86400) return Math.floor(s / 3600) + ' h ago';
  return Math.floor(s / 86400) + ' d ago';
}

// pretty formats JSON (a value, or a string holding JSON) for reading.
export function pretty(v) {
  if (v === undefined) return '';
  if (typeof v === 'string') {
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch { return v; }
  }
  return JSON.stringify(v, null, 2);
}

// oneLine is a short one-line form of JSON, for a summary.
export function oneLine(v, max = 90) {
  let s = typeof v === 'string' ? v : JSON.stringify(v);
  if (s === undefined) return '';
  s = s.replace(/\s+/g, ' ');
  return s.length > max ? s.slice(0, max - 1) + '…' : s;
}

export function shortId(id) {
  return id && id.length > 14 ? id.slice(0, 12) + '…' : id || '';
}

// badge is a status, outcome or decision as a coloured label.
export function badge(word, title) {
  const w = String(word || 'unknown');
  return h('span', {class: 'badge b-' + w.replace(/[^a-z_]/g, ''), title}, w.replaceAll('_', ' '));
}

// codeBlock shows JSON or text, folded when long.
export function codeBlock(v, label) {
  const text = pretty(v);
  const pre = h('pre', {class: 'code', tabindex: 0, 'aria-label': label || 'JSON'}, text);
  if (text.split('\n').length <= 12) return pre;
  return h('details', {class: 'fold'}, h('summary', {}, (label || 'JSON') + ' · ' + oneLine(v, 60)), pre);
}

// rowKeys: in a list of rows (sel), Enter or Space opens the focused one;
// j and k (or the arrows) move between them.
export function rowKeys(e, sel, open) {
  const tr = e.target.closest(sel);
  if (!tr || e.altKey || e.ctrlKey || e.metaKey) return;
  if (e.key === 'Enter' || e.key === ' ') {
    e.preventDefault();
    open(tr);
  } else if (e.key === 'j' || e.key === 'ArrowDown') {
    e.preventDefault();
    (tr.nextElementSibling || tr).focus();
  } else if (e.key === 'k' || e.key === 'ArrowUp') {
    e.preventDefault();
    (tr.previousElementSibling || tr).focus();
  }
}
