// One run: its summary, the approval it waits for, and its panels
// (timeline, transcript, reasoning, policy and audit, stages, events),
// live while it goes.

import {api} from './api.js';
import {Follower} from './live.js';
import {buildTimeline, renderTimeline} from './timeline.js';
import {transcript, reasoning, policy, stages, eventList} from './panels.js';
import {h, fill, fmtMs, fmtInt, fmtCost, fmtTime, badge, codeBlock} from './util.js';

const TABS = [
  {id: 'timeline', label: 'Timeline'},
  {id: 'transcript', label: 'Transcript'},
  {id: 'reasoning', label: 'Reasoning'},
  {id: 'policy', label: 'Policy & audit'},
  {id: 'stages', label: 'Stages', only: (st) => isPipeline(st)},
  {id: 'events', label: 'Events'},
];

const isPipeline = (st) => (st.run && st.run.kind === 'pipeline') || st.events.some((e) => e.type === 'agent_started');

// mountRun shows run id in root; me is the caller (GET /v1/whoami). It
// answers its unmount.
export function mountRun(root, id, me, tab) {
  const st = {id, me: me || {}, run: null, events: [], audit: null, tab: TABS.some((t) => t.id === tab) ? tab : '', conn: '',
    open: new Set(), notice: '', error: '', busy: false, frame: 0, tick: 0, gone: false};
  const ui = skeleton(root, st);
  const follower = new Follower(id, {
    onEvent: (ev) => { addEvent(st, ev); schedule(); },
    onStop: (run, err) => {
      if (run) st.run = run;
      if (err) st.error = 'The events could not be read: ' + err.message;
      loadAudit();
      schedule();
    },
    onState: (s) => { st.conn = s; schedule(); },
  });

  // schedule draws the run at the next frame: all of it, or (light) only
  // what the clock moves, the stats and the timeline.
  function schedule(light) {
    if (!light) st.full = true;
    if (!st.frame && !st.gone) {
      st.frame = requestAnimationFrame(() => {
        st.frame = 0;
        render(st, ui, decide, !st.full);
        st.full = false;
      });
    }
  }

  async function loadAudit() {
    try { st.audit = (await api(`/v1/runs/${encodeURIComponent(id)}/audit`)).records; } catch { st.audit = st.audit || []; }
    schedule();
  }

  async function decide(approve, deny, reason) {
    st.busy = true;
    schedule();
    const body = {};
    if (approve.length) body.approve = approve;
    if (deny.length) body.deny = deny;
    if (deny.length && reason) body.reason = reason;
    try {
      await api(`/v1/runs/${encodeURIComponent(id)}/resume`, {method: 'POST', body});
      st.run = {...st.run, status: 'running', result: undefined}; // the paused Result is over
      st.notice = `${approve.length ? 'Approved' : 'Denied'}: the run goes on.`;
      follower.follow();
    } catch (e) {
      st.notice = 'The run did not resume: ' + e.message;
    }
    st.busy = false;
    schedule();
  }

  listen(st, ui, schedule);
  (async () => {
    try {
      st.run = await api(`/v1/runs/${encodeURIComponent(id)}`);
      if (st.run.kind === 'eval') { // an evaluation (a case's parent): its own page
        location.replace('#/evals/' + encodeURIComponent(id));
        return;
      }
    } catch (e) {
      st.error = e.status === 404 ? `There is no run ${id}.` : 'The run could not be read: ' + e.message;
      render(st, ui, decide);
      return;
    }
    render(st, ui, decide);
    ui.title.focus();
    loadAudit();
    follower.follow();
  })();
  st.tick = setInterval(() => { if (st.run && st.run.status === 'running') schedule(true); }, 1000);
  return () => { st.gone = true; follower.stop(); clearInterval(st.tick); cancelAnimationFrame(st.frame); };
}

// listen handles the tabs (a click, the arrow keys) and notes which
// folds are open, at the click: a toggle event comes later, maybe after
// the panel was drawn anew.
function listen(st, ui, schedule) {
  ui.tabs.addEventListener('keydown', (e) => tabKeys(e, st, ui, schedule));
  ui.tabs.addEventListener('click', (e) => {
    const b = e.target.closest('[role=tab]');
    if (b) { st.tab = b.dataset.tab; schedule(); }
  });
  ui.panels.addEventListener('click', (e) => {
    const sum = e.target.closest('summary');
    const d = sum && sum.parentElement;
    const key = d && d.dataset.key;
    if (key) d.open ? st.open.delete(key) : st.open.add(key);
  }, true);
}

// addEvent keeps ev; a resume supersedes the events of the resumed turn
// and after, which the resumed run sends again.
function addEvent(st, ev) {
  if (ev.type === 'resume') {
    const turn = ev.data.turn || 0;
    st.events = st.events.filter((e) => (e.data.turn || 0) < turn);
    return;
  }
  st.events.push(ev);
}

function skeleton(root, st) {
  const title = h('h1', {tabindex: -1, class: 'run-title'}, 'Run');
  const ui = {
    title,
    meta: h('div', {class: 'head-meta'}),
    approval: h('div', {class: 'approval-slot'}),
    answer: h('div', {class: 'answer-slot'}),
    stats: h('dl', {class: 'stats'}),
    tabs: h('div', {class: 'tabs', role: 'tablist', 'aria-label': 'Views of the run'}),
    panels: h('div', {class: 'panels'}),
    error: h('p', {class: 'error-box', role: 'alert', hidden: true}),
  };
  fill(root, h('section', {class: 'run', 'aria-labelledby': 'run-title'},
    h('nav', {class: 'crumbs', 'aria-label': 'Back'}, h('a', {href: '#/'}, '← All runs'), h('span', {class: 'muted hint'}, 'Esc')),
    h('header', {class: 'run-head'}, title, ui.meta),
    ui.error, ui.approval, ui.answer, ui.stats, ui.tabs, ui.panels));
  title.id = 'run-title';
  return ui;
}

function render(st, ui, decide, light) {
  ui.error.hidden = !st.error;
  ui.error.textContent = st.error;
  if (!st.run) return;
  const run = st.run;
  const res = run.result;
  fill(ui.stats, stats(st).map(([k, v, title]) => h('div', {class: 'stat', title}, h('dt', {}, k), h('dd', {}, v))));
  if (light) {
    renderPanels(st, ui, ['timeline']);
    return;
  }
  fill(ui.title, run.agent, h('span', {class: 'muted'}, '@' + run.version), run.kind === 'pipeline' ? h('span', {class: 'tag'}, 'pipeline') : null);
  document.title = `${run.agent} · ${run.status.replaceAll('_', ' ')} · agentry`;
  fill(ui.meta, badge(run.status), st.conn ? h('span', {class: 'conn c-' + st.conn, role: 'status'}, st.conn === 'live' ? 'live' : 'reconnecting…') : null,
    h('code', {class: 'run-id', title: 'run id'}, run.run_id),
    h('a', {href: '#/runs/' + encodeURIComponent(run.run_id), class: 'permalink'}, 'link'),
    run.parent_run_id ? h('a', {href: '#/runs/' + encodeURIComponent(run.parent_run_id)}, 'parent run') : null);
  renderApproval(st, ui.approval, decide);
  renderAnswer(run, res, ui.answer);
  renderTabs(st, ui);
  renderPanels(st, ui, null);
}

function stats(st) {
  const run = st.run;
  const res = run.result;
  const own = st.events.filter((e) => e.data.run_id === st.id);
  const lastEnd = [...own].reverse().find((e) => e.type === 'turn_end');
  const started = own.length ? new Date(own[0].data.time).getTime() : new Date(run.created_at).getTime();
  const dur = res ? res.metrics && res.metrics.duration_ms : Date.now() - started;
  const turns = res ? res.iterations : Math.max(run.turns, ...own.map((e) => e.data.turn || 0));
  const tokens = res ? res.token_usage : null;
  const tokenText = tokens ? fmtInt(tokens.total_tokens) : fmtInt(lastEnd ? lastEnd.data.total_tokens : run.tokens);
  const out = [
    ['Outcome', res ? badge(res.outcome) : run.outcome ? badge(run.outcome) : '–'],
    ['Ended', res ? (res.terminate_reason || '').replaceAll('_', ' ') : run.status === 'running' ? 'not yet' : run.status],
    ['Duration', fmtMs(dur)],
    ['Turns', fmtInt(turns)],
    ['Tokens', tokenText, tokens ? `${fmtInt(tokens.prompt_tokens)} in, ${fmtInt(tokens.completion_tokens)} out` : ''],
    ['Cost', fmtCost(res ? res.estimated_cost_usd : run.cost_usd)],
  ];
  if (res && (res.model || res.provider)) out.push(['Model', [res.model, res.provider].filter(Boolean).join(' · ')]);
  out.push(['Started', fmtTime(run.created_at)]);
  return out;
}

function renderAnswer(run, res, slot) {
  if (!res) { fill(slot); return; }
  const err = res.error && res.terminate_reason !== 'awaiting_approval' ? res.error : null;
  const answer = res.result;
  fill(slot,
    err ? h('div', {class: 'error-box'}, h('strong', {}, err.code + ': '), err.message) : null,
    answer !== null && answer !== undefined && answer !== '' ? h('div', {class: 'answer'}, h('h2', {}, 'Answer'),
      typeof answer === 'string' ? h('p', {class: 'text'}, answer) : codeBlock(answer, 'answer')) : null);
}

// renderApproval shows the calls a paused run waits on, with approve and
// deny for a caller who may decide them: an admin, or a runner of the
// run's own user.
function renderApproval(st, slot, decide) {
  const run = st.run;
  const res = run.result;
  const calls = run.status === 'awaiting_approval' && res ? res.waiting || [] : [];
  // Drawn anew only when what it shows changes: a person may be typing
  // the reason.
  const me = st.me;
  const may = me.role === 'admin' || (me.role === 'runner' && (run.user || '') === me.name);
  const sig = JSON.stringify([calls, may, st.busy, st.notice]);
  if (slot.dataset.sig === sig) return;
  slot.dataset.sig = sig;
  if (calls.length === 0) {
    fill(slot, st.notice ? h('p', {class: 'notice', role: 'status'}, st.notice) : null);
    return;
  }
  const reason = h('input', {type: 'text', id: 'deny-reason', placeholder: 'why (sent with a denial)', autocomplete: 'off',
    value: st.reason || '', oninput: (e) => { st.reason = e.target.value; }});
  const button = (text, cls, approve, deny) => h('button', {type: 'button', class: cls, disabled: st.busy || !may,
    onclick: () => decide(approve, deny, reason.value.trim())}, text);
  const ids = calls.map((c) => c.call_id);
  fill(slot, h('section', {class: 'approval', 'aria-labelledby': 'approval-title'},
    h('h2', {id: 'approval-title'}, `Waiting for approval: ${calls.length} call${calls.length > 1 ? 's' : ''}`),
    h('ul', {class: 'calls'}, calls.map((c) => h('li', {class: 'call'},
      h('div', {class: 'call-head'}, h('strong', {}, c.tool), h('code', {class: 'muted'}, ' ' + c.call_id), h('span', {class: 'muted'}, ' · rule ' + c.rule)),
      codeBlock(argumentsOf(res, c.call_id), c.tool + ' arguments'),
      may && calls.length > 1 ? h('div', {class: 'actions'}, button('Approve', 'approve', [c.call_id], []), button('Deny', 'deny', [], [c.call_id])) : null))),
    may ? h('div', {class: 'actions main'},
      h('label', {for: 'deny-reason', class: 'sr-only'}, 'Reason for a denial'), reason,
      button(calls.length > 1 ? 'Approve all' : 'Approve', 'approve', ids, []),
      button(calls.length > 1 ? 'Deny all' : 'Deny', 'deny', [], ids))
      : h('p', {class: 'note'}, me.role === 'runner'
        ? `This run is ${run.user ? run.user + "'s" : "the local operator's"}: its own runner key or an admin may approve or deny.`
        : `Your key's role (${me.role || 'none'}) may not approve or deny: the run's own runner key or an admin may.`),
    st.notice ? h('p', {class: 'notice', role: 'status'}, st.notice) : null));
}

function argumentsOf(res, callId) {
  const step = (res.steps || []).find((s) => s.action && s.action.call_id === callId);
  if (step) return step.action.input;
  for (const m of res.messages || []) {
    const c = (m.tool_calls || []).find((x) => x.id === callId);
    if (c) return c.arguments;
  }
  return {};
}

function renderTabs(st, ui) {
  const tabs = TABS.filter((t) => !t.only || t.only(st));
  if (!tabs.some((t) => t.id === st.tab)) st.tab = isPipeline(st) ? 'stages' : 'timeline';
  if (ui.tabs.dataset.ids !== tabs.map((t) => t.id).join()) {
    ui.tabs.dataset.ids = tabs.map((t) => t.id).join();
    fill(ui.tabs, tabs.map((t) => h('button', {type: 'button', role: 'tab', id: 'tab-' + t.id, 'aria-controls': 'panel-' + t.id,
      dataset: {tab: t.id}}, t.label)));
    fill(ui.panels, tabs.map((t) => h('div', {role: 'tabpanel', id: 'panel-' + t.id, 'aria-labelledby': 'tab-' + t.id, tabindex: 0, class: 'panel'})));
  }
  for (const b of ui.tabs.children) {
    const on = b.dataset.tab === st.tab;
    b.setAttribute('aria-selected', String(on));
    b.tabIndex = on ? 0 : -1;
  }
}

// renderPanels draws the panels anew (only those named, when names are
// given), keeping the folds opened and the focus where they were.
function renderPanels(st, ui, only) {
  const res = st.run.result;
  const start = st.events.length ? new Date(st.events[0].data.time).getTime() : 0;
  const content = {
    timeline: () => renderTimeline(buildTimeline(st.id, st.events, res)),
    transcript: () => transcript(res, st.events, st.id),
    reasoning: () => reasoning(res),
    policy: () => policy(st.events, st.audit, st.id),
    stages: () => stages(res, st.events),
    events: () => eventList(st.events, start),
  };
  const active = document.activeElement;
  const focusKey = active && ui.panels.contains(active) && active.closest('[data-key]') ? active.closest('[data-key]').dataset.key : '';
  for (const p of ui.panels.children) {
    const id = p.id.slice('panel-'.length);
    p.hidden = id !== st.tab;
    if (!only || only.includes(id)) fill(p, content[id]());
  }
  restoreOpen(ui.panels, st.open);
  if (focusKey) {
    const el = ui.panels.querySelector(`[data-key="${CSS.escape(focusKey)}"] summary`);
    if (el) el.focus();
  }
}

// restoreOpen opens again the folds a person opened before the panel was
// drawn anew.
function restoreOpen(panels, open) {
  for (const d of panels.querySelectorAll('details')) {
    const li = d.closest('[data-key]');
    const key = d.dataset.key || (li && li.dataset.key);
    if (key && open.has(key)) d.open = true;
  }
}

// tabKeys: the arrows, Home and End move between the tabs.
function tabKeys(e, st, ui, schedule) {
  const tabs = [...ui.tabs.children];
  const i = tabs.findIndex((b) => b.dataset.tab === st.tab);
  let j = -1;
  if (e.key === 'ArrowRight') j = (i + 1) % tabs.length;
  else if (e.key === 'ArrowLeft') j = (i - 1 + tabs.length) % tabs.length;
  else if (e.key === 'Home') j = 0;
  else if (e.key === 'End') j = tabs.length - 1;
  if (j < 0) return;
  e.preventDefault();
  st.tab = tabs[j].dataset.tab;
  schedule();
  tabs[j].focus();
}
