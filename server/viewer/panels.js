// The panels of a run: its transcript, its reasoning, its policy
// decisions and audit records, a pipeline's stages, and its raw events.

import {h, fmtMs, fmtInt, fmtCost, fmtTime, oneLine, codeBlock, badge} from './util.js';

// transcript shows the conversation: the Result's messages, or while the
// run goes, what its events said so far.
export function transcript(result, events, runId) {
  const msgs = result && result.messages ? result.messages : fromEvents(events, runId);
  if (msgs.length === 0) return h('p', {class: 'empty'}, 'Nothing said yet.');
  return h('ol', {class: 'transcript'}, msgs.map(message));
}

function message(m) {
  const role = m.role || 'assistant';
  const calls = (m.tool_calls || []).map((c) => h('div', {class: 'call'},
    h('div', {class: 'call-head'}, h('span', {class: 'arrow', 'aria-hidden': 'true'}, '→ '), h('strong', {}, c.name),
      h('code', {class: 'muted'}, ' ' + (c.id || ''))),
    codeBlock(c.arguments || {}, c.name + ' arguments')));
  let body = null;
  if (role === 'tool') body = codeBlock(m.content, (m.name || 'tool') + ' result');
  else if (m.content) body = h('div', {class: 'text'}, m.content);
  const head = h('div', {class: 'msg-head'}, h('span', {class: 'role r-' + role}, role),
    role === 'tool' ? h('span', {class: 'muted'}, `${m.name || ''} ${m.tool_call_id || ''}`) : null);
  return h('li', {class: 'msg m-' + role}, head, body, calls);
}

function fromEvents(events, runId) {
  const out = [];
  for (const {type, data: d} of events) {
    if (d.run_id !== runId) continue;
    if (type === 'thinking' && d.content) out.push({role: 'assistant', content: d.content});
    if (type === 'tool_call_start' && d.tool) {
      const last = out[out.length - 1];
      const call = {id: d.tool.id, name: d.tool.name, arguments: d.tool.arguments};
      if (last && last.role === 'assistant' && !last.done) (last.tool_calls ||= []).push(call);
      else out.push({role: 'assistant', tool_calls: [call]});
    }
    if (type === 'tool_call_end' && d.tool) {
      if (out.length) out[out.length - 1].done = true;
      out.push({role: 'tool', name: d.tool.name, tool_call_id: d.tool.id, content: d.tool.output !== undefined ? d.tool.output : {error: d.tool.error}});
    }
    if (type === 'run_end' && d.content) out.push({role: 'assistant', content: d.content});
  }
  return out;
}

// reasoning shows what the run concluded and why: its confidence and
// decision, and each step of its trace.
export function reasoning(result) {
  if (!result) return h('p', {class: 'empty'}, 'The reasoning is known once the run ends.');
  const conf = Math.round((result.confidence || 0) * 100);
  const meter = h('span', {class: 'meter-fill'});
  meter.style.width = conf + '%';
  const lists = [['Context used', result.context_used], ['Assumptions', result.assumptions_made], ['Handed to', result.handoffs],
    ['Warnings', result.diagnostics && result.diagnostics.warnings]].filter(([, v]) => v && v.length);
  return h('div', {class: 'reasoning'},
    h('div', {class: 'confidence'}, h('span', {class: 'k'}, 'Confidence'),
      h('span', {class: 'meter', role: 'meter', 'aria-valuenow': conf, 'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-label': 'Confidence'}, meter),
      h('strong', {}, conf + '%'), result.source_quality ? h('span', {class: 'muted'}, ' sources: ' + result.source_quality) : null),
    h('h3', {}, 'Decision'), h('p', {class: 'decision'}, result.decision || '–'),
    lists.map(([k, v]) => [h('h3', {}, k), h('ul', {class: 'plain'}, v.map((x) => h('li', {}, x)))]),
    result.alternatives && result.alternatives.length ? [h('h3', {}, 'Alternatives'), codeBlock(result.alternatives, 'alternatives')] : null,
    h('h3', {}, `Steps (${(result.steps || []).length})`),
    (result.steps || []).length ? h('ol', {class: 'steps'}, result.steps.map(step)) : h('p', {class: 'empty'}, 'No tool was called.'));
}

function step(s) {
  const a = s.action;
  return h('li', {class: 'step'},
    h('div', {class: 'step-head'}, h('span', {class: 'step-n'}, '#' + s.step), h('span', {class: 'muted'}, 'turn ' + s.turn),
      a ? [h('strong', {}, a.tool), h('span', {class: 'muted'}, fmtMs(a.duration_ms)), badge(a.error ? 'error' : 'success')] : null),
    s.thought ? h('p', {class: 'thought'}, s.thought) : null,
    a ? h('div', {class: 'io'}, h('div', {}, h('h4', {}, 'Input'), codeBlock(a.input || {}, 'input')),
      h('div', {}, h('h4', {}, a.error ? 'Error' : 'Output'), a.error ? h('p', {class: 'error-text'}, a.error) : codeBlock(a.output, 'output'))) : null,
    s.parse_error ? h('p', {class: 'error-text'}, 'Unusable reply: ' + s.parse_error) : null,
    s.final_answer ? h('p', {}, h('strong', {}, 'Final answer: '), s.final_answer) : null);
}

// policy shows the run's policy decisions (from its events) and its
// audit records (from the hash-chained audit log).
export function policy(events, audit, runId) {
  const decisions = events.filter((e) => e.type === 'policy_decision');
  return h('div', {class: 'policy'},
    h('h3', {}, `Policy decisions (${decisions.length})`),
    decisions.length ? h('ul', {class: 'decisions'}, decisions.map(({data: d}) => {
      const p = d.data || {};
      return h('li', {}, badge(p.decision), h('strong', {}, ' ' + (p.target || '')), h('span', {class: 'muted'}, ` turn ${d.turn} · ${p.rule || ''}`),
        d.run_id !== runId ? h('span', {class: 'muted'}, ' · ' + d.agent_name) : null,
        p.reason ? h('div', {class: 'reason'}, p.reason) : null);
    })) : h('p', {class: 'empty'}, 'The policy decided nothing in this run.'),
    h('h3', {}, `Audit records (${audit ? audit.length : '…'})`),
    audit && audit.length ? auditTable(audit) : h('p', {class: 'empty'}, audit ? 'No audit record.' : 'Loading…'));
}

function auditTable(recs) {
  return h('div', {class: 'table-wrap'}, h('table', {class: 'audit'},
    h('thead', {}, h('tr', {}, ['#', 'time', 'decision', 'target', 'rule', 'user', 'reason', 'hash'].map((c) => h('th', {scope: 'col'}, c)))),
    h('tbody', {}, recs.map((r) => h('tr', {},
      h('td', {}, r.seq), h('td', {class: 'nowrap'}, fmtTime(r.time)), h('td', {}, badge(r.decision)), h('td', {}, r.target || ''),
      h('td', {}, r.rule), h('td', {}, r.user_id || '–'), h('td', {}, r.reason || ''),
      h('td', {}, h('code', {title: 'hash ' + r.hash + '\nprevious ' + (r.prev || '–')}, (r.hash || '').slice(0, 10))))))));
}

// stages shows a pipeline run as its stages, in the order they ran: the
// path taken, and each stage's outcome, next stage, time, tokens, cost.
export function stages(result, events) {
  const env = result && result.envelope;
  const hist = env ? env.history || [] : liveStages(events);
  if (hist.length === 0) return h('p', {class: 'empty'}, 'No stage has run yet.');
  const path = hist.map((s) => s.stage);
  return h('div', {class: 'stages'},
    h('p', {class: 'path', 'aria-label': 'Path taken'}, path.map((s, i) => [i ? h('span', {class: 'arrow', 'aria-hidden': 'true'}, ' → ') : null,
      h('span', {class: 'chip'}, s)]), env && !env.pending ? [h('span', {class: 'arrow', 'aria-hidden': 'true'}, ' → '), h('span', {class: 'chip end'}, 'end')] : null),
    h('ol', {class: 'stage-list'}, hist.map((s) => h('li', {class: 'stage'},
      h('div', {class: 'stage-head'}, h('span', {class: 'muted'}, 'hop ' + s.hop), h('strong', {}, s.stage), h('span', {class: 'muted'}, s.agent || ''),
        badge(s.outcome || s.status || 'running')),
      h('div', {class: 'muted'}, [fmtMs(s.duration_ms), s.tokens ? fmtInt(s.tokens) + ' tokens' : '', s.cost_usd ? fmtCost(s.cost_usd) : '',
        s.next ? 'next: ' + s.next : ''].filter(Boolean).join(' · ')),
      s.error ? h('p', {class: 'error-text'}, s.error) : null,
      s.run_id ? h('a', {href: '#/runs/' + encodeURIComponent(s.run_id)}, 'open the stage’s run') : null))),
    env && env.pending ? h('p', {class: 'note'}, `Paused at ${env.pending.stage} (${env.pending.outcome}): ${env.pending.question || ''}`) : null,
    env && env.errors && env.errors.length ? codeBlock(env.errors, 'errors') : null);
}

function liveStages(events) {
  const out = [];
  for (const {type, data: d} of events) {
    const p = d.data || {};
    if (type === 'agent_started') out.push({stage: p.stage, agent: d.agent_name, hop: p.hop});
    if (type === 'agent_completed' && out.length) Object.assign(out[out.length - 1], {outcome: p.status, duration_ms: p.duration_ms});
  }
  return out;
}

// eventList shows the raw events, newest last.
export function eventList(events, start) {
  if (events.length === 0) return h('p', {class: 'empty'}, 'No event yet.');
  const shown = events.slice(-400);
  return h('div', {class: 'table-wrap'}, h('table', {class: 'events'},
    h('thead', {}, h('tr', {}, ['id', '+time', 'type', 'turn', 'what'].map((c) => h('th', {scope: 'col'}, c)))),
    h('tbody', {}, shown.map((e) => h('tr', {},
      h('td', {}, e.id), h('td', {class: 'nowrap'}, start ? fmtMs(new Date(e.data.time).getTime() - start) : ''),
      h('td', {}, h('code', {}, e.type)), h('td', {}, e.data.turn ?? ''), h('td', {class: 'what'}, what(e)))))));
}

function what(e) {
  const d = e.data;
  if (d.tool) return `${d.tool.name} ${d.tool.status || ''} ${oneLine(d.tool.output || d.tool.arguments || '', 70)}`;
  if (d.content) return oneLine(d.content, 90);
  if (d.error) return d.error.message;
  if (d.data) return oneLine(d.data, 90);
  return '';
}
