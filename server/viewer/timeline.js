// A run's timeline as a waterfall: its turns, each turn's model call and
// tool calls (and a pipeline's stages, a sub-agent's run), placed by the
// times of the run's events, with durations, tokens and cost.

import {h, fmtMs, fmtInt, fmtCost, oneLine, codeBlock, badge} from './util.js';

const ms = (iso) => new Date(iso).getTime();

// buildTimeline turns the run's events (and its Result, once it has one)
// into rows {kind, label, meta, t0, t1, open, status, depth, detail}.
export function buildTimeline(runId, events, result, now = Date.now()) {
  const own = events.filter((e) => e.data.run_id === runId);
  if (own.length === 0) return result ? fromResult(result) : {start: now, end: now, rows: [], estimated: false};
  const tl = new Builder(runId, own, result, now);
  for (const ev of own) tl.add(ev);
  tl.subRuns(events.filter((e) => e.data.run_id !== runId));
  return tl.done();
}

class Builder {
  constructor(runId, own, result, now) {
    this.now = now;
    this.start = ms(own[0].data.time);
    this.end = null;
    this.rows = [];
    this.turns = new Map(); // turn -> its row
    this.models = new Map(); // turn -> its model call row
    this.tools = new Map(); // turn/call id -> its row
    this.stages = [];
    this.calls = result ? result.model_calls || [] : [];
  }

  add(ev) {
    const d = ev.data;
    const t = ms(d.time);
    switch (ev.type) {
      case 'turn_start': return this.turnStart(d, t);
      case 'thinking': case 'content_chunk': case 'error': return this.modelDone(d.turn, t);
      case 'tool_call_start': return this.toolStart(d, t);
      case 'tool_call_end': return this.toolEnd(d, t);
      case 'policy_decision': return this.decision(d);
      case 'turn_end': return this.turnEnd(d, t);
      case 'agent_started': return this.stageStart(d, t);
      case 'agent_completed': return this.stageEnd(d, t);
      case 'run_end': this.end = t; this.closeAll(t); return;
    }
  }

  turnStart(d, t) {
    const row = {kind: 'turn', label: 'turn ' + d.turn, meta: '', t0: t, t1: null, depth: 0};
    this.turns.set(d.turn, row);
    this.rows.push(row);
    const mc = this.calls.filter((c) => c.turn === d.turn && !c.agent);
    const call = mc[mc.length - 1];
    const model = {kind: 'model', label: call ? (call.model || call.provider || 'model') : 'model call', t0: t, t1: null, depth: 1,
      meta: call ? modelMeta(call) : '', status: call && call.error ? 'error' : ''};
    if (call && call.duration_ms) { model.t1 = t + call.duration_ms; model.dur = call.duration_ms; }
    this.models.set(d.turn, model);
    this.rows.push(model);
  }

  modelDone(turn, t) {
    const m = this.models.get(turn);
    if (m && m.t1 === null) m.t1 = t;
  }

  toolStart(d, t) {
    this.modelDone(d.turn, t);
    const tool = d.tool || {};
    const row = {kind: 'tool', label: tool.name, meta: oneLine(tool.arguments || {}, 60), t0: t, t1: null, depth: 1,
      key: `tool:${d.turn}/${tool.id}`, detail: {id: tool.id, arguments: tool.arguments}};
    this.tools.set(d.turn + '/' + tool.id, row);
    this.rows.push(row);
  }

  toolEnd(d, t) {
    const tool = d.tool || {};
    const row = this.tools.get(d.turn + '/' + tool.id);
    if (!row) return;
    row.t1 = t;
    row.dur = tool.duration_ms;
    row.status = tool.status || '';
    row.detail.output = tool.output;
    row.detail.error = tool.error;
    row.detail.duration = tool.duration_ms;
  }

  decision(d) {
    const p = d.data || {};
    const row = this.tools.get(d.turn + '/' + p.call_id);
    if (row) row.decision = p.decision;
  }

  turnEnd(d, t) {
    this.modelDone(d.turn, t);
    // Nothing of a turn outlasts its end: a model call placed by its
    // recorded duration (a paused run's, read back) is cut at it, so the
    // next turn never seems to start before this one ends.
    const m = this.models.get(d.turn);
    if (m && m.t1 !== null && m.t1 > t) m.t1 = t;
    for (const [key, r] of this.tools) if (key.startsWith(d.turn + '/') && r.t1 !== null && r.t1 > t) r.t1 = t;
    const row = this.turns.get(d.turn);
    if (!row) return;
    row.t1 = t;
    row.dur = d.duration_ms;
    row.meta = d.total_tokens ? fmtInt(d.total_tokens) + ' tokens so far' : '';
  }

  stageStart(d, t) {
    const p = d.data || {};
    const row = {kind: 'stage', label: 'stage ' + (p.stage || d.agent_name), meta: d.agent_name, t0: t, t1: null, depth: 0};
    this.stages.push(row);
    this.rows.push(row);
  }

  stageEnd(d, t) {
    const p = d.data || {};
    const row = [...this.stages].reverse().find((r) => r.t1 === null);
    if (!row) return;
    row.t1 = t;
    row.status = p.status || '';
  }

  // subRuns adds a row for each sub-agent's run, from its first event to
  // its last.
  subRuns(events) {
    const by = new Map();
    for (const e of events) {
      const r = by.get(e.data.run_id) || {kind: 'sub', label: 'sub-agent ' + e.data.agent_name, meta: e.data.run_id,
        t0: ms(e.data.time), t1: null, depth: 1};
      r.t1 = ms(e.data.time);
      if (e.type === 'run_end') r.status = (e.data.data || {}).outcome || '';
      by.set(e.data.run_id, r);
    }
    for (const sub of by.values()) {
      let i = this.rows.length;
      while (i > 0 && this.rows[i - 1].t0 > sub.t0) i--;
      this.rows.splice(i, 0, sub);
    }
  }

  closeAll(t) {
    for (const r of this.rows) if (r.t1 === null) r.t1 = t;
  }

  done() {
    for (const r of this.rows) {
      if (r.t1 === null) { r.t1 = this.now; r.open = true; }
    }
    const end = Math.max(this.end || this.now, ...this.rows.map((r) => r.t1));
    return {start: this.start, end, rows: this.rows, estimated: false};
  }
}

function modelMeta(c) {
  const tokens = (c.prompt_tokens || 0) + (c.completion_tokens || 0);
  return [`${fmtInt(c.prompt_tokens)} in / ${fmtInt(c.completion_tokens)} out`, tokens ? fmtCost(c.cost_usd) : '',
    c.attempts > 1 ? c.attempts + ' attempts' : ''].filter(Boolean).join(' · ');
}

// fromResult places the Result's calls one after another, for a run
// whose events are not in the log: the durations are the Result's, the
// positions only estimated.
function fromResult(res) {
  const start = ms(res.started_at);
  let t = start;
  const rows = [];
  const turns = [...new Set([...(res.model_calls || []).map((c) => c.turn), ...(res.steps || []).map((s) => s.turn)])].sort((a, b) => a - b);
  for (const turn of turns) {
    const turnRow = {kind: 'turn', label: 'turn ' + turn, meta: '', t0: t, t1: t, depth: 0};
    rows.push(turnRow);
    for (const c of (res.model_calls || []).filter((m) => m.turn === turn && !m.agent)) {
      rows.push({kind: 'model', label: c.model || c.provider, meta: modelMeta(c), t0: t, t1: t + c.duration_ms, depth: 1});
      t += c.duration_ms;
    }
    let longest = 0;
    for (const s of (res.steps || []).filter((x) => x.turn === turn && x.action)) {
      const a = s.action;
      rows.push({kind: 'tool', label: a.tool, meta: oneLine(a.input || {}, 60), t0: t, t1: t + (a.duration_ms || 0), depth: 1, key: `tool:${turn}/${a.call_id}`,
        status: a.error ? 'error' : 'success', detail: {id: a.call_id, arguments: a.input, output: a.output, error: a.error}});
      longest = Math.max(longest, a.duration_ms || 0);
    }
    t += longest;
    turnRow.t1 = t;
  }
  return {start, end: Math.max(t, ms(res.finished_at)), rows, estimated: true};
}

// renderTimeline draws the waterfall.
export function renderTimeline(tl) {
  if (tl.rows.length === 0) return h('p', {class: 'empty'}, 'No turns yet.');
  const span = Math.max(tl.end - tl.start, 1);
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => h('span', {class: 'tick'}, fmtMs(span * f)));
  const list = h('ol', {class: 'wf', 'aria-label': 'Timeline'});
  for (const r of tl.rows) list.append(row(r, tl.start, span));
  return h('div', {class: 'timeline'},
    tl.estimated ? h('p', {class: 'note'}, 'Placed from the Result: the durations are measured, the positions estimated.') : null,
    h('div', {class: 'wf-axis', 'aria-hidden': 'true'}, h('span', {class: 'wf-axis-label'}, 'since the start'), h('span', {class: 'ticks'}, ticks),
      h('span', {class: 'wf-dur'}, 'took')),
    list);
}

function row(r, start, span) {
  // A measured duration is finer than the events' milliseconds, but never
  // longer than the row's place: a call a resumed run serves from its log
  // keeps the duration it took when it ran, and must not outlast its turn.
  const dur = r.dur ? Math.min(r.dur, r.t1 - r.t0 + 1) : r.t1 - r.t0;
  const paused = r.decision === 'pause';
  const bar = h('span', {class: 'wf-bar' + (r.open ? ' open' : '') + (paused ? ' paused' : r.status === 'error' ? ' failed' : '')});
  // Within the track: the events' times are in whole milliseconds.
  const width = Math.min(Math.max(dur / span * 100, 0.4), 100);
  const left = Math.min(Math.max((r.t0 - start) / span * 100, 0), 100 - width);
  bar.style.left = left.toFixed(3) + '%';
  bar.style.width = width.toFixed(3) + '%';
  const label = h('span', {class: 'wf-name'}, r.label);
  const meta = h('span', {class: 'wf-meta'}, r.meta || '',
    paused ? [' ', badge('awaiting_approval')] : r.status && r.kind !== 'turn' ? [' ', badge(r.status)] : null,
    r.decision && !paused && r.decision !== 'allow' ? [' ', badge(r.decision)] : null);
  const track = [h('span', {class: 'wf-track'}, bar), h('span', {class: 'wf-dur'}, r.open ? fmtMs(dur) + '…' : fmtMs(dur))];
  const li = h('li', {class: `wf-row k-${r.kind} d-${r.depth}`, dataset: {kind: r.kind}});
  if (r.kind === 'tool' && r.detail) {
    const body = h('div', {class: 'wf-detail'},
      h('div', {class: 'kv'}, h('span', {class: 'k'}, 'call'), h('code', {}, r.detail.id || '–')),
      h('h4', {}, 'Arguments'), codeBlock(r.detail.arguments || {}, 'arguments'),
      r.detail.output !== undefined ? [h('h4', {}, 'Result'), codeBlock(r.detail.output, 'result')] : null,
      r.detail.error ? [h('h4', {}, 'Error'), h('p', {class: 'error-text'}, r.detail.error)] : null);
    li.append(h('details', {class: 'wf-fold', dataset: {key: r.key}}, h('summary', {class: 'wf-head'}, h('span', {class: 'wf-label'}, label, meta), track), body));
  } else {
    li.append(h('div', {class: 'wf-head'}, h('span', {class: 'wf-label'}, label, meta), track));
  }
  return li;
}
