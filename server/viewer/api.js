// The API as the page uses it: the bearer key (kept in sessionStorage,
// asked for when the API answers 401), JSON calls, and a run's event
// stream read with fetch (EventSource cannot send a header), resumed
// with Last-Event-ID.

const KEY = 'agentry.key';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || '';
  }
}

let askKey = null; // (message) => Promise<string|null>, set by the app
let asking = null; // the one question in flight, shared by every caller

// setKeyPrompt sets how the page asks for a key.
export function setKeyPrompt(fn) { askKey = fn; }

export function getKey() { return sessionStorage.getItem(KEY) || ''; }

export function setKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

function headers(extra) {
  const hd = {Accept: 'application/json', ...extra};
  const key = getKey();
  if (key) hd.Authorization = 'Bearer ' + key;
  return hd;
}

// unauthorized asks for a key (once for all the calls that need it) and
// says whether to try again.
async function unauthorized(message) {
  if (!askKey) return false;
  asking ||= askKey(message).finally(() => { asking = null; });
  const key = await asking;
  if (key === null) return false;
  setKey(key);
  return true;
}

async function errorOf(resp) {
  const body = await resp.json().catch(() => null);
  const e = body && body.error;
  return new ApiError(resp.status, e && e.code, e ? e.message : resp.statusText);
}

// api calls the API and answers the decoded JSON, or throws an ApiError.
// A 401 asks for a key and tries again.
export async function api(path, {method = 'GET', body, signal} = {}) {
  for (;;) {
    const init = {method, signal, cache: 'no-store', headers: headers(body ? {'Content-Type': 'application/json'} : {})};
    if (body !== undefined) init.body = JSON.stringify(body);
    const resp = await fetch(path, init);
    if (resp.ok) return resp.json();
    const err = await errorOf(resp);
    if (resp.status === 401 && await unauthorized(err.message)) continue;
    throw err;
  }
}

// parseBlock reads one server-sent event ("id:", "event:", "data:" lines);
// a comment alone (a heartbeat) is null.
export function parseBlock(block) {
  let id = 0, type = '', data = '';
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id') id = Number(value) || 0;
    else if (field === 'event') type = value;
    else if (field === 'data') data += (data ? '\n' : '') + value;
  }
  if (!type && !data) return null;
  let parsed = null;
  try { parsed = JSON.parse(data); } catch { parsed = {raw: data}; }
  return {id, type: type || 'message', data: parsed};
}

// readEvents reads a run's event stream once, from after the event id
// after, giving each event to onEvent, until the server closes it (or
// the connection drops, or signal aborts). It answers the last id seen.
export async function readEvents(runId, after, onEvent, signal) {
  let resp;
  for (;;) {
    const extra = after > 0 ? {'Last-Event-ID': String(after), Accept: 'text/event-stream'} : {Accept: 'text/event-stream'};
    resp = await fetch(`/v1/runs/${encodeURIComponent(runId)}/events`, {headers: headers(extra), signal, cache: 'no-store'});
    if (resp.ok) break;
    const err = await errorOf(resp);
    if (resp.status === 401 && await unauthorized(err.message)) continue;
    throw err;
  }
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let last = after;
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return last;
    buf += value;
    buf = buf.replace(/\r\n?/g, '\n');
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = parseBlock(buf.slice(0, i));
      buf = buf.slice(i + 2);
      if (!ev) continue;
      if (ev.id) last = ev.id;
      onEvent(ev);
    }
  }
}
