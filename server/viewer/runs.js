// The runs list: filtered by agent, status and time, sorted by any
// column, paged by the API's cursor, refreshed while it shows the newest.

import {api} from './api.js';
import {h, fill, fmtMs, fmtInt, fmtCost, fmtTime, relTime, shortId, badge, rowKeys} from './util.js';

const STATUSES = ['running', 'awaiting_approval', 'completed', 'failed', 'aborted', 'interrupted'];
const PAGE = 25; // runs a page, unless the route says ?limit= (1–100)
const REFRESH_MS = 2000;
// What a run is to its parent, by the parent's kind.
const parentTag = {pipeline: 'stage', agent: 'sub-agent', eval: 'case'};

const COLUMNS = [
  {key: 'status', label: 'Status', value: (r) => r.status},
  {key: 'agent', label: 'Agent', value: (r) => r.agent + '@' + r.version},
  {key: 'run_id', label: 'Run', value: (r) => r.run_id, cls: 'c-id'},
  {key: 'created_at', label: 'Started', value: (r) => r.created_at},
  {key: 'duration', label: 'Duration', value: duration, cls: 'num c-opt'},
  {key: 'turns', label: 'Turns', value: (r) => r.turns, cls: 'num c-opt'},
  {key: 'tokens', label: 'Tokens', value: (r) => r.tokens, cls: 'num c-opt'},
  {key: 'cost_usd', label: 'Cost', value: (r) => r.cost_usd ?? -1, cls: 'num c-opt'},
];

function duration(r) {
  const end = r.status === 'running' ? Date.now() : new Date(r.updated_at).getTime();
  return end - new Date(r.created_at).getTime();
}

// mountRuns shows the list in root, with the filters of query (the
// route's ?agent=&status=&since=&until=), the focus on the row of run
// focusId when it is there; it answers its unmount.
export function mountRuns(root, query, go, focusId) {
  const st = {filters: {agent: query.get('agent') || '', status: query.get('status') || '',
    since: query.get('since') || '', until: query.get('until') || ''},
  cursors: [''], runs: [], next: '', sort: {key: 'created_at', dir: -1}, timer: 0, gone: false, error: '',
  limit: Math.min(Math.max(Number(query.get('limit')) || PAGE, 1), 100)};
  const body = h('tbody', {});
  const pager = h('nav', {class: 'pager', 'aria-label': 'Pages'});
  const status = h('p', {class: 'list-status', role: 'status', 'aria-live': 'polite'});
  const head = h('tr', {}, COLUMNS.map((c) => sortHeader(c, st, () => { render(); })));
  const table = h('table', {class: 'runs-table'}, h('caption', {class: 'sr-only'}, 'Runs, newest first'), h('thead', {}, head), body);
  fill(root, h('section', {class: 'runs', 'aria-labelledby': 'runs-title'},
    h('div', {class: 'title-row'}, h('h1', {id: 'runs-title', tabindex: -1}, 'Runs'), status),
    filtersForm(st, () => { st.cursors = ['']; go(st.filters); }),
    h('div', {class: 'table-wrap'}, table), pager));

  function render() {
    for (const th of head.children) th.setAttribute('aria-sort', th.dataset.key === st.sort.key ? (st.sort.dir > 0 ? 'ascending' : 'descending') : 'none');
    let focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.runId : '';
    if (focusId && st.runs.length) {
      focused = focused || focusId;
      focusId = '';
    }
    const col = COLUMNS.find((c) => c.key === st.sort.key);
    const rows = [...st.runs].sort((a, b) => cmp(col.value(a), col.value(b)) * st.sort.dir);
    fill(body, rows.length ? rows.map((r) => runRow(r)) : h('tr', {}, h('td', {colspan: COLUMNS.length, class: 'empty'},
      st.error || 'No run matches.')));
    if (focused) { const tr = body.querySelector(`tr[data-run-id="${CSS.escape(focused)}"]`); if (tr) tr.focus(); }
    renderPager();
    status.textContent = st.error ? '' : `${st.runs.length} run${st.runs.length === 1 ? '' : 's'}` + (page() === 0 ? ' · updating' : '');
  }

  function renderPager() {
    const newer = h('button', {type: 'button', disabled: page() === 0, onclick: () => { st.cursors.pop(); load(); }}, '← Newer');
    const older = h('button', {type: 'button', disabled: !st.next, onclick: () => { st.cursors.push(st.next); load(); }}, 'Older →');
    fill(pager, newer, h('span', {class: 'muted'}, 'page ' + (page() + 1)), older);
  }

  const page = () => st.cursors.length - 1;

  async function load() {
    clearTimeout(st.timer);
    const q = new URLSearchParams({limit: st.limit});
    const f = st.filters;
    if (f.agent) q.set('agent', f.agent);
    if (f.status) q.set('status', f.status);
    if (f.since) q.set('since', rfc3339(f.since));
    if (f.until) q.set('until', rfc3339(f.until));
    if (st.cursors[page()]) q.set('cursor', st.cursors[page()]);
    try {
      const res = await api('/v1/runs?' + q);
      if (st.gone) return;
      st.runs = res.runs;
      st.next = res.next_cursor || '';
      st.error = '';
    } catch (e) {
      if (st.gone) return;
      st.error = 'The runs could not be read: ' + e.message;
    }
    render();
    if (page() === 0 && !st.gone) st.timer = setTimeout(load, REFRESH_MS);
  }

  body.addEventListener('keydown', (e) => rowKeys(e, 'tr[data-run-id]', (tr) => go({run: tr.dataset.runId})));
  body.addEventListener('click', (e) => {
    const tr = e.target.closest('tr[data-run-id]');
    if (tr && !e.target.closest('a')) go({run: tr.dataset.runId});
  });
  load();
  return () => { st.gone = true; clearTimeout(st.timer); };
}

function cmp(a, b) {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a).localeCompare(String(b));
}

function sortHeader(c, st, onSort) {
  const btn = h('button', {type: 'button', class: 'sort'}, c.label, h('span', {class: 'sort-mark', 'aria-hidden': 'true'}));
  btn.addEventListener('click', () => {
    st.sort = st.sort.key === c.key ? {key: c.key, dir: -st.sort.dir} : {key: c.key, dir: c.key === 'agent' || c.key === 'status' ? 1 : -1};
    onSort();
  });
  return h('th', {scope: 'col', class: c.cls || '', dataset: {key: c.key}}, btn);
}

function runRow(r) {
  const href = '#/runs/' + encodeURIComponent(r.run_id);
  const label = `${r.agent}@${r.version}, ${r.status.replaceAll('_', ' ')}, started ${fmtTime(r.created_at)}`;
  return h('tr', {tabindex: 0, class: 'row s-' + r.status, dataset: {runId: r.run_id}, 'aria-label': label},
    h('td', {}, badge(r.status)),
    h('td', {class: 'c-agent'}, h('strong', {}, r.agent), h('span', {class: 'muted'}, '@' + r.version),
      r.kind === 'pipeline' ? h('span', {class: 'tag'}, 'pipeline') : null, r.parent_run_id ? h('span', {class: 'tag'}, parentTag[r.parent_kind] || 'child') : null,
      // In a narrow window the columns of numbers give way to one line.
      h('div', {class: 'c-sub muted'}, `${fmtMs(duration(r))}${r.status === 'running' ? '…' : ''} · ${fmtInt(r.turns)} turn${r.turns === 1 ? '' : 's'} · ${fmtInt(r.tokens)} tokens · ${fmtCost(r.cost_usd)}`)),
    h('td', {class: 'c-id'}, h('a', {href, tabindex: -1}, h('code', {}, shortId(r.run_id)))),
    h('td', {class: 'nowrap', title: fmtTime(r.created_at)}, relTime(r.created_at)),
    h('td', {class: 'num c-opt'}, fmtMs(duration(r)) + (r.status === 'running' ? '…' : '')),
    h('td', {class: 'num c-opt'}, fmtInt(r.turns)),
    h('td', {class: 'num c-opt'}, fmtInt(r.tokens)),
    h('td', {class: 'num c-opt'}, fmtCost(r.cost_usd)));
}

function rfc3339(local) {
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? local : d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function filtersForm(st, apply) {
  const f = st.filters;
  const agent = h('select', {id: 'f-agent', name: 'agent'}, h('option', {value: ''}, 'all agents'));
  if (f.agent) agent.append(h('option', {value: f.agent, selected: true}, f.agent));
  api('/v1/agents').then((res) => {
    const names = [...res.agents, ...(res.pipelines || [])].map((a) => a.name);
    for (const name of [...new Set(names)].sort()) {
      if (name !== f.agent) agent.append(h('option', {value: name}, name));
    }
  }).catch(() => {});
  const status = h('select', {id: 'f-status', name: 'status'}, h('option', {value: ''}, 'any status'),
    STATUSES.map((s) => h('option', {value: s, selected: s === f.status}, s.replaceAll('_', ' '))));
  const since = h('input', {id: 'f-since', name: 'since', type: 'datetime-local', value: f.since});
  const until = h('input', {id: 'f-until', name: 'until', type: 'datetime-local', value: f.until});
  const form = h('form', {class: 'filters', role: 'search', 'aria-label': 'Filter the runs'},
    field('Agent', agent), field('Status', status), field('From', since), field('To', until),
    h('button', {type: 'button', class: 'quiet', onclick: () => {
      for (const el of [agent, status, since, until]) el.value = '';
      read();
    }}, 'Clear'));
  const read = () => { Object.assign(f, {agent: agent.value, status: status.value, since: since.value, until: until.value}); apply(); };
  form.addEventListener('change', read);
  form.addEventListener('submit', (e) => { e.preventDefault(); read(); });
  return form;
}

function field(label, input) {
  return h('label', {class: 'field', for: input.id}, h('span', {}, label), input);
}
