// The trace viewer: routes (#/ the runs, #/runs/ID a run, #/evals the
// evaluations, #/evals/ID one, #/evals/ID?vs=OTHER two compared,
// #/conversations the conversations, #/conversations/ID one as a chat),
// who the caller is, the key dialog, and the keys that work everywhere.

import {api, setKeyPrompt, getKey, setKey} from './api.js';
import {mountRuns} from './runs.js';
import {mountRun} from './run.js';
import {mountEvals, mountEval} from './evals.js';
import {mountCompare} from './evalcompare.js';
import {mountConversations, mountConversation} from './conversations.js';
import {h, fill} from './util.js';

const main = document.getElementById('main');
const who = document.getElementById('who');
let unmount = () => {};
let me = {role: ''}; // the caller, as GET /v1/whoami says
let lastRun = ''; // the run shown last: its row has the focus back in the list
let lastEval = ''; // likewise, the evaluation
let lastConv = ''; // and the conversation

// route reads the hash: {view: 'runs', query}, {view: 'run', id, tab},
// {view: 'evals', query}, {view: 'eval', id} or {view: 'compare', id, query}.
function route() {
  const [path, qs] = location.hash.replace(/^#/, '').split('?');
  const query = new URLSearchParams(qs || '');
  const m = path.match(/^\/runs\/([^/]+)$/);
  if (m) return {view: 'run', id: decodeURIComponent(m[1]), tab: query.get('tab') || ''};
  const c = path.match(/^\/conversations\/([^/]+)$/);
  if (c) return {view: 'conversation', id: decodeURIComponent(c[1])};
  if (path === '/conversations') return {view: 'conversations', query};
  const e = path.match(/^\/evals\/([^/]+)$/);
  if (e) return {view: query.get('vs') ? 'compare' : 'eval', id: decodeURIComponent(e[1]), query};
  if (path === '/evals') return {view: 'evals', query};
  return {view: 'runs', query};
}

// up is where Escape goes from a view: a run and an evaluation to their
// lists, a comparison to its evaluation.
function up(r) {
  if (r.view === 'run') return '#/';
  if (r.view === 'eval') return '#/evals';
  if (r.view === 'compare') return '#/evals/' + encodeURIComponent(r.id);
  if (r.view === 'conversation') return '#/conversations';
  return '';
}

// go navigates: {run: ID} opens a run; filters open the list with them.
function go(to) {
  if (to.run) {
    location.hash = '#/runs/' + encodeURIComponent(to.run);
    return;
  }
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(to)) if (v) q.set(k, v);
  const s = q.toString();
  location.hash = '#/' + (s ? '?' + s : '');
}

function show() {
  unmount();
  const r = route();
  const evals = r.view === 'evals' || r.view === 'eval' || r.view === 'compare';
  const convs = r.view === 'conversations' || r.view === 'conversation';
  const section = evals ? 'evals' : convs ? 'conversations' : 'runs';
  for (const a of document.querySelectorAll('.top-nav a')) {
    if (a.dataset.nav === section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.title = 'agentry · ' + (evals ? 'evaluations' : section);
  if (r.view === 'conversation') {
    lastConv = r.id;
    unmount = mountConversation(main, r.id, me);
    return;
  }
  if (r.view === 'conversations') {
    unmount = mountConversations(main, r.query, lastConv, me);
    const t = document.getElementById('conversations-title');
    if (t && document.activeElement === document.body) t.focus({preventScroll: true});
    return;
  }
  if (r.view === 'run') {
    lastRun = r.id;
    unmount = mountRun(main, r.id, me, r.tab);
    return;
  }
  if (r.view === 'eval' || r.view === 'compare') {
    lastEval = r.id;
    unmount = r.view === 'eval' ? mountEval(main, r.id) : mountCompare(main, r.id, r.query);
    return;
  }
  unmount = r.view === 'evals' ? mountEvals(main, r.query, lastEval) : mountRuns(main, r.query, go, lastRun);
  const t = document.getElementById(r.view === 'evals' ? 'evals-title' : 'runs-title');
  if (t && document.activeElement === document.body) t.focus({preventScroll: true});
}

// askKey shows the key dialog; it answers the key, or null.
function askKey(message) {
  const dlg = document.getElementById('key-dialog');
  const input = document.getElementById('key-input');
  const note = document.getElementById('key-note');
  note.textContent = message || 'This server needs a key.';
  input.value = '';
  return new Promise((resolve) => {
    const form = dlg.querySelector('form');
    const done = (key) => {
      form.removeEventListener('submit', onSubmit);
      dlg.removeEventListener('cancel', onCancel);
      if (dlg.open) dlg.close();
      resolve(key);
    };
    const onSubmit = (e) => { e.preventDefault(); const k = input.value.trim(); if (k) done(k); };
    const onCancel = (e) => { e.preventDefault(); done(null); };
    form.addEventListener('submit', onSubmit);
    dlg.addEventListener('cancel', onCancel);
    document.getElementById('key-cancel').onclick = () => done(null);
    dlg.showModal();
    input.focus();
  });
}

async function whoami() {
  try {
    me = await api('/v1/whoami');
    fill(who, me.keys ? [h('span', {class: 'who-name'}, me.name), h('span', {class: 'who-sep'}, ' · '), h('span', {class: 'who-role'}, me.role)]
      : [h('span', {class: 'who-name'}, 'no keys'), h('span', {class: 'who-sep'}, ' · '),
        h('span', {class: 'who-role', title: 'The server has no keys: every caller is an admin.'}, 'admin')]);
  } catch (e) {
    me = {role: ''};
    fill(who, h('span', {class: 'who-role'}, 'signed out'));
  }
}

// Keys anywhere but in a field: Escape (or u) goes back up (to the runs,
// the evaluations, or the evaluation compared), / goes to the filters,
// ? shows the keys.
document.addEventListener('keydown', (e) => {
  if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
  const t = e.target;
  if (t.closest && t.closest('input, select, textarea, dialog')) return;
  if ((e.key === 'Escape' || e.key === 'u') && up(route())) {
    e.preventDefault();
    location.hash = up(route());
  } else if (e.key === '/' && route().view === 'runs') {
    e.preventDefault();
    document.getElementById('f-agent').focus();
  } else if (e.key === '?') {
    e.preventDefault();
    document.getElementById('help-dialog').showModal();
  }
});

document.getElementById('key-button').addEventListener('click', async () => {
  const key = await askKey(getKey() ? 'Replace or forget the key this tab keeps.' : 'Give a key for this server.');
  if (key !== null) setKey(key);
  await whoami();
  show();
});
document.getElementById('key-forget').addEventListener('click', () => {
  setKey('');
  document.getElementById('key-dialog').close();
  location.reload();
});
document.getElementById('help-button').addEventListener('click', () => document.getElementById('help-dialog').showModal());
document.getElementById('help-close').addEventListener('click', () => document.getElementById('help-dialog').close());

setKeyPrompt(askKey);
window.addEventListener('hashchange', show);
whoami().then(show);
