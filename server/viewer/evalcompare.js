// Two evaluations side by side (#/evals/ID?vs=BASELINE): an agent of
// one against an agent of the other, as the server compares them
// (GET /v1/evals/ID/compare/BASELINE): their figures and the changes,
// the regressions and fixes, and their cases next to each other, each
// linked to its run.

import {api} from './api.js';
import {h, fill, fmtMs, fmtInt, fmtCost, shortId} from './util.js';
import {crumbs, figures, changes, verdictCell, num, signed} from './evals.js';

// mountCompare shows evaluation id against query's vs (its agents: the
// query's agent and base, or the server's choice); it answers its
// unmount.
export function mountCompare(root, id, query) {
  const vs = query.get('vs');
  const st = {gone: false};
  const back = crumbs('#/evals/' + encodeURIComponent(id), 'Evaluation ' + shortId(id));
  fill(root, h('section', {class: 'eval'}, back, h('p', {class: 'empty'}, 'Loading…')));
  const q = new URLSearchParams();
  if (query.get('agent')) q.set('agent', query.get('agent'));
  if (query.get('base')) q.set('baseline_agent', query.get('base'));
  (async () => {
    let rep, base;
    try {
      [rep, base] = await Promise.all([
        api(`/v1/evals/${encodeURIComponent(id)}/compare/${encodeURIComponent(vs)}?${q}`),
        api('/v1/evals/' + encodeURIComponent(vs))]);
    } catch (e) {
      if (st.gone) return;
      fill(root, h('section', {class: 'eval'}, back, h('p', {class: 'error-box', role: 'alert'}, 'The comparison could not be made: ' + e.message)));
      return;
    }
    if (st.gone) return;
    const c = rep.baseline;
    const to = rep.agents.find((a) => a.agent === c.to);
    const from = base.agents.find((a) => a.agent === c.from);
    document.title = `${rep.dataset} · comparison · agentry`;
    fill(root, h('section', {class: 'eval compare', 'aria-labelledby': 'eval-title'},
      back,
      h('header', {class: 'run-head'}, h('h1', {tabindex: -1, class: 'run-title', id: 'eval-title'}, 'Comparison', h('span', {class: 'tag'}, rep.dataset)),
        h('p', {class: 'head-meta'}, h('strong', {}, c.to), h('span', {class: 'muted'}, 'of'), evalLink(rep.id),
          h('span', {class: 'muted'}, 'against'), h('strong', {}, c.from), h('span', {class: 'muted'}, 'of'), evalLink(base.id))),
      pickers(rep, base, c, id, vs),
      h('div', {class: 'table-wrap'}, figuresTable(from, to, base, rep)),
      h('section', {class: 'comparison', 'aria-label': 'Changes'}, changes(c)),
      h('h2', {class: 'sec', id: 'cases-title'}, 'Cases'),
      casesSideBySide(from, to, c, Math.max(rep.trials, base.trials))));
    document.getElementById('eval-title').focus({preventScroll: true});
  })();
  return () => { st.gone = true; };
}

function evalLink(id) {
  return h('a', {href: '#/evals/' + encodeURIComponent(id)}, h('code', {}, shortId(id)));
}

// pickers choose the agents compared, when an evaluation has several,
// and swap the two evaluations.
function pickers(rep, base, c, id, vs) {
  const go = (i, v, agent, b) => {
    const q = new URLSearchParams({vs: v});
    if (agent) q.set('agent', agent);
    if (b) q.set('base', b);
    location.hash = `#/evals/${encodeURIComponent(i)}?${q}`;
  };
  const select = (sid, agents, chosen) => h('select', {id: sid}, agents.map((a) => h('option', {value: a.agent, selected: a.agent === chosen}, a.agent)));
  const mine = select('cmp-agent', rep.agents, c.to);
  const theirs = select('cmp-base', base.agents, c.from);
  const form = h('form', {class: 'filters compare-form', 'aria-label': 'What is compared'},
    rep.agents.length > 1 ? h('label', {class: 'field', for: 'cmp-agent'}, h('span', {}, 'Agent'), mine) : null,
    base.agents.length > 1 ? h('label', {class: 'field', for: 'cmp-base'}, h('span', {}, 'Against'), theirs) : null,
    h('button', {type: 'button', id: 'cmp-swap', onclick: () => go(vs, id, c.from, c.to)}, 'Swap ⇄'));
  form.addEventListener('change', () => go(id, vs, mine.value, theirs.value));
  return form;
}

// figuresTable puts the two agents' figures in columns, with the
// change: green where it is better, red where it is worse.
function figuresTable(from, to, base, rep) {
  // Which way is better, per figure (more tool calls are neither).
  const better = {'Pass rate': 1, 'Pass@k': 1, 'Steps a task': -1, 'Tool calls': 0, 'Tool errors': -1, Tokens: -1, Cost: -1, Duration: -1};
  const raw = (a) => [a.pass_rate, a.pass_at_k, a.steps_per_task, a.tool_calls, a.tool_error_rate, a.token_usage, a.cost_usd, a.duration_ms];
  const pts = (v) => (v * 100).toFixed(0) + ' pts';
  const fmts = [pts, pts, num, fmtInt, pts, fmtInt, fmtCost, fmtMs];
  const f0 = figures(from), f1 = figures(to), r0 = raw(from), r1 = raw(to);
  return h('table', {class: 'cmp-table'}, h('caption', {class: 'sr-only'}, 'The figures of the two agents'),
    h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'Figure'),
      h('th', {scope: 'col', class: 'num'}, from.agent, h('span', {class: 'muted small c-opt'}, h('br'), shortId(base.id))),
      h('th', {scope: 'col', class: 'num'}, to.agent, h('span', {class: 'muted small c-opt'}, h('br'), shortId(rep.id))),
      h('th', {scope: 'col', class: 'num'}, 'Change'))),
    h('tbody', {}, f0.map(([label, v0], i) => {
      const d = r0[i] === null || r1[i] === null ? null : r1[i] - r0[i];
      const cls = d === null || Math.abs(d) < 1e-12 || !better[label] ? 'same' : Math.sign(d) === better[label] ? 'better' : 'worse';
      return h('tr', {}, h('th', {scope: 'row'}, label), h('td', {class: 'num'}, v0), h('td', {class: 'num'}, f1[i][1]),
        h('td', {class: 'num delta ' + cls}, signed(d !== null && Math.abs(d) < 1e-12 ? 0 : d, fmts[i])));
    })));
}

// casesSideBySide: each case trial of either, the baseline's verdict and
// this one's, the regressions first, then the fixes.
function casesSideBySide(from, to, c, trials) {
  const keyOf = (cr) => cr.case + '#' + cr.trial;
  const before = new Map(from.cases.map((cr) => [keyOf(cr), cr]));
  const after = new Map(to.cases.map((cr) => [keyOf(cr), cr]));
  const keys = [...new Set([...to.cases.map(keyOf), ...from.cases.map(keyOf)])];
  const change = (k) => c.regressions.includes(k) ? 'regressed' : c.fixes.includes(k) ? 'fixed' : !before.has(k) ? 'new' : !after.has(k) ? 'gone' : '';
  const rank = {regressed: 0, fixed: 1};
  keys.sort((a, b) => (rank[change(a)] ?? 2) - (rank[change(b)] ?? 2));
  return h('div', {class: 'table-wrap'}, h('table', {class: 'cases-table', 'aria-labelledby': 'cases-title'},
    h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'Case'), h('th', {scope: 'col'}, from.agent + ' (baseline)'),
      h('th', {scope: 'col'}, to.agent))),
    h('tbody', {}, keys.map((k) => {
      const ch = change(k);
      const cr = after.get(k) || before.get(k);
      return h('tr', {class: ch ? 'row-' + ch : '', dataset: {case: k}}, h('th', {scope: 'row', class: 'case-name'}, cr.case,
        trials > 1 ? h('span', {class: 'muted'}, ' #' + cr.trial) : null),
        verdictCell(before.get(k), ''), verdictCell(after.get(k), ch));
    }))));
}
