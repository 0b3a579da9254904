// The evaluations: their list (GET /v1/evals), and one evaluation's
// report (GET /v1/evals/ID): each agent's figures, the comparison of its
// two agents, and the table of cases × agents, each cell a case's
// verdict linked to its run's trace.

import {api} from './api.js';
import {h, fill, fmtMs, fmtInt, fmtCost, fmtTime, relTime, shortId, badge, rowKeys} from './util.js';

const PAGE = 25;
const REFRESH_MS = 5000; // an evaluation that goes moves to its end
// The columns' classes: a narrow window keeps status, dataset and agents
// (with their pass rates).
const COL_CLASS = ['', '', 'c-agents', 'num c-opt', 'c-id', 'c-opt'];

// mountEvals shows the list in root, the focus on the row of focusId
// when it is there; it answers its unmount.
export function mountEvals(root, query, focusId) {
  const st = {cursors: [''], evals: [], next: '', timer: 0, gone: false, error: '',
    limit: Math.min(Math.max(Number(query.get('limit')) || PAGE, 1), 100)};
  const body = h('tbody', {});
  const pager = h('nav', {class: 'pager', 'aria-label': 'Pages'});
  const status = h('p', {class: 'list-status', role: 'status', 'aria-live': 'polite'});
  const cols = ['Status', 'Dataset', 'Agents', 'Passed', 'Evaluation', 'Started'];
  fill(root, h('section', {class: 'runs evals', 'aria-labelledby': 'evals-title'},
    h('div', {class: 'title-row'}, h('h1', {id: 'evals-title', tabindex: -1}, 'Evaluations'), status),
    h('p', {class: 'note'}, 'An evaluation runs each case of a dataset as an ordinary run: open one for its cases, passed or failed, and their traces.'),
    h('div', {class: 'table-wrap'}, h('table', {class: 'runs-table evals-table'}, h('caption', {class: 'sr-only'}, 'Evaluations, newest first'),
      h('thead', {}, h('tr', {}, cols.map((c, i) => h('th', {scope: 'col', class: COL_CLASS[i]}, c)))), body)),
    pager));

  const page = () => st.cursors.length - 1;
  function render() {
    let focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.evalId : '';
    if (focusId && st.evals.length) { focused = focused || focusId; focusId = ''; }
    fill(body, st.evals.length ? st.evals.map(evalRow) : h('tr', {}, h('td', {colspan: cols.length, class: 'empty'},
      st.error || 'No evaluation yet: agentry eval DATASET stores one.')));
    if (focused) { const tr = body.querySelector(`tr[data-eval-id="${CSS.escape(focused)}"]`); if (tr) tr.focus(); }
    fill(pager, h('button', {type: 'button', disabled: page() === 0, onclick: () => { st.cursors.pop(); load(); }}, '← Newer'),
      h('span', {class: 'muted'}, 'page ' + (page() + 1)),
      h('button', {type: 'button', disabled: !st.next, onclick: () => { st.cursors.push(st.next); load(); }}, 'Older →'));
    status.textContent = st.error ? '' : `${st.evals.length} evaluation${st.evals.length === 1 ? '' : 's'}`;
  }

  async function load() {
    clearTimeout(st.timer);
    const q = new URLSearchParams({limit: st.limit});
    if (st.cursors[page()]) q.set('cursor', st.cursors[page()]);
    try {
      const res = await api('/v1/evals?' + q);
      if (st.gone) return;
      Object.assign(st, {evals: res.evals, next: res.next_cursor || '', error: ''});
    } catch (e) {
      if (st.gone) return;
      st.error = 'The evaluations could not be read: ' + e.message;
    }
    render();
    if (page() === 0 && !st.gone) st.timer = setTimeout(load, REFRESH_MS);
  }

  const open = (tr) => { location.hash = '#/evals/' + encodeURIComponent(tr.dataset.evalId); };
  body.addEventListener('keydown', (e) => rowKeys(e, 'tr[data-eval-id]', open));
  body.addEventListener('click', (e) => {
    const tr = e.target.closest('tr[data-eval-id]');
    if (tr && !e.target.closest('a')) open(tr);
  });
  load();
  return () => { st.gone = true; clearTimeout(st.timer); };
}

function evalRow(ev) {
  const href = '#/evals/' + encodeURIComponent(ev.id);
  return h('tr', {tabindex: 0, class: 'row', dataset: {evalId: ev.id}, 'aria-label': `${ev.dataset}, ${ev.summary || ev.status}, started ${fmtTime(ev.created_at)}`},
    h('td', {}, badge(ev.status)),
    h('td', {class: 'c-agent'}, h('strong', {}, ev.dataset), ev.rescore_of ? h('span', {class: 'tag', title: 'scored again from ' + ev.rescore_of}, 'rescore') : null,
      ev.trials > 1 ? h('span', {class: 'tag'}, ev.trials + ' trials') : null),
    h('td', {class: 'c-agents'}, ev.agents.length ? ev.agents.map((a) => h('span', {class: 'agent-rate'},
      h('span', {}, a.agent), ' ', h('span', {class: rateClass(a.pass_rate)}, pct(a.pass_rate)))) : h('span', {class: 'muted'}, '–')),
    h('td', {class: 'num nowrap c-opt'}, ev.summary || '–'),
    h('td', {class: 'c-id'}, h('a', {href, tabindex: -1}, h('code', {}, shortId(ev.id)))),
    h('td', {class: 'nowrap c-opt', title: fmtTime(ev.created_at)}, relTime(ev.created_at)));
}

// mountEval shows the evaluation id's report in root; it answers its
// unmount.
export function mountEval(root, id) {
  const st = {gone: false};
  fill(root, h('section', {class: 'eval'}, crumbs('#/evals', 'All evaluations'), h('p', {class: 'empty'}, 'Loading…')));
  (async () => {
    let rep;
    try {
      rep = await api('/v1/evals/' + encodeURIComponent(id));
    } catch (e) {
      if (st.gone) return;
      fill(root, h('section', {class: 'eval'}, crumbs('#/evals', 'All evaluations'),
        h('p', {class: 'error-box', role: 'alert'}, e.status === 404 ? `There is no evaluation ${id}.` : 'The evaluation could not be read: ' + e.message)));
      return;
    }
    if (st.gone) return;
    document.title = `${rep.dataset} · evaluation · agentry`;
    const c = rep.comparison;
    fill(root, h('section', {class: 'eval', 'aria-labelledby': 'eval-title'},
      crumbs('#/evals', 'All evaluations'),
      evalHead(rep),
      comparePicker(rep),
      h('h2', {class: 'sec'}, rep.agents.length > 1 ? 'Agents, side by side' : 'Agent'),
      h('div', {class: 'agent-cards'}, rep.agents.map(agentCard)),
      c ? comparisonBox(c) : null,
      rep.baseline ? comparisonBox(rep.baseline, rep.id) : null,
      rep.not_run && rep.not_run.length ? h('p', {class: 'notice'}, 'Not scored (no run of them to score again): ', rep.not_run.join(', ')) : null,
      h('h2', {class: 'sec', id: 'cases-title'}, 'Cases'),
      casesTable(rep)));
    document.getElementById('eval-title').focus({preventScroll: true});
  })();
  return () => { st.gone = true; };
}

export function crumbs(href, label) {
  return h('nav', {class: 'crumbs', 'aria-label': 'Back'}, h('a', {href}, '← ' + label), h('span', {class: 'muted hint'}, 'Esc'));
}

export function evalHead(rep, title) {
  return h('header', {class: 'run-head'},
    h('h1', {tabindex: -1, class: 'run-title', id: 'eval-title'}, title || rep.dataset, h('span', {class: 'tag'}, 'evaluation')),
    h('div', {class: 'head-meta'},
      h('code', {class: 'run-id', title: 'evaluation id'}, rep.id),
      h('span', {class: 'muted'}, fmtTime(rep.created_at)),
      rep.trials > 1 ? h('span', {class: 'muted'}, rep.trials + ' trials a case') : null,
      rep.rescore_of ? h('span', {class: 'muted'}, 'scored again from ', h('a', {href: '#/evals/' + encodeURIComponent(rep.rescore_of)}, shortId(rep.rescore_of))) : null));
}

// comparePicker offers the other evaluations to compare this one with.
function comparePicker(rep) {
  const sel = h('select', {id: 'vs', name: 'vs'}, h('option', {value: ''}, 'another evaluation…'));
  const button = h('button', {type: 'submit', class: 'primary', disabled: true}, 'Compare');
  api('/v1/evals?limit=100').then((res) => {
    for (const ev of res.evals) {
      if (ev.id === rep.id || !ev.agents.length) continue;
      sel.append(h('option', {value: ev.id}, `${ev.dataset} · ${ev.agents.map((a) => a.agent).join(', ')} · ${fmtTime(ev.created_at)} · ${shortId(ev.id)}`));
    }
  }).catch(() => {});
  sel.addEventListener('change', () => { button.disabled = !sel.value; });
  const form = h('form', {class: 'filters compare-form', 'aria-label': 'Compare with another evaluation'},
    h('label', {class: 'field', for: 'vs'}, h('span', {}, 'Compare with'), sel), button);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (sel.value) location.hash = `#/evals/${encodeURIComponent(rep.id)}?vs=${encodeURIComponent(sel.value)}`;
  });
  return form;
}

// agentCard is one agent's figures.
export function agentCard(a) {
  const tools = Object.entries(a.tool_latency_ms || {}).sort(([x], [y]) => x.localeCompare(y));
  const tags = Object.entries(a.tags || {}).sort(([x], [y]) => x.localeCompare(y));
  return h('article', {class: 'agent-card', 'aria-label': a.agent},
    h('div', {class: 'card-head'}, h('h3', {}, a.agent),
      h('span', {class: 'pass ' + rateClass(a.pass_rate)}, `${a.passed}/${a.total} passed`),
      h('span', {class: 'meter', 'aria-hidden': 'true'}, meterFill(a.pass_rate))),
    h('dl', {class: 'stats'}, figures(a).map(([k, v, title]) => h('div', {class: 'stat', title}, h('dt', {}, k), h('dd', {}, v)))),
    tools.length ? h('table', {class: 'mini'}, h('caption', {}, 'Tool latency'),
      h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'Tool'), h('th', {scope: 'col', class: 'num'}, 'Calls'),
        h('th', {scope: 'col', class: 'num'}, 'p50'), h('th', {scope: 'col', class: 'num'}, 'p95'))),
      h('tbody', {}, tools.map(([name, l]) => h('tr', {}, h('td', {}, h('code', {}, name)), h('td', {class: 'num'}, fmtInt(l.calls)),
        h('td', {class: 'num'}, fmtMs(l.p50)), h('td', {class: 'num'}, fmtMs(l.p95))))))
      : h('p', {class: 'note'}, 'No tool called.'),
    tags.length ? h('div', {class: 'tags-line'}, h('span', {class: 'muted small'}, 'Tags '), tags.map(([tag, s]) =>
      h('span', {class: 'chip ' + rateClass(s.total ? s.passed / s.total : 0), title: `${s.passed} of ${s.total} passed`}, `${tag} ${s.passed}/${s.total}`))) : null);
}

// meterFill is a bar as long as the rate (set by script: the page's
// policy allows no style attribute).
function meterFill(rate) {
  const el = h('span', {class: 'meter-fill ' + rateClass(rate)});
  el.style.width = (rate * 100).toFixed(1) + '%';
  return el;
}

// figures are an agent's stats, as [label, value, title].
export function figures(a) {
  return [
    ['Pass rate', pct(a.pass_rate), `${a.passed} of ${a.total} case trials passed`],
    ['Pass@k', pct(a.pass_at_k), 'the cases that passed in at least one trial'],
    ['Steps a task', num(a.steps_per_task)],
    ['Tool calls', fmtInt(a.tool_calls)],
    ['Tool errors', pct(a.tool_error_rate), `of ${fmtInt(a.tool_calls)} tool calls`],
    ['Tokens', fmtInt(a.token_usage)],
    ['Cost', fmtCost(a.cost_usd)],
    ['Duration', fmtMs(a.duration_ms), 'all the runs, one after another'],
  ];
}

// comparisonBox shows how the second agent did against the first, or,
// the report's baseline (id is the report's), how its agent did against
// one of an earlier evaluation, with a link to the two side by side.
function comparisonBox(c, id) {
  const tid = c.baseline ? 'cmp-baseline-title' : 'cmp-title';
  const q = c.baseline ? new URLSearchParams({vs: c.baseline, agent: c.to, base: c.from}) : null;
  return h('section', {class: 'comparison' + (c.baseline ? ' against-baseline' : ''), 'aria-labelledby': tid},
    h('h2', {id: tid}, h('strong', {}, c.to), ' against ', h('strong', {}, c.from),
      c.baseline ? [' of the baseline ', h('a', {href: `#/evals/${encodeURIComponent(id)}?${q}`}, shortId(c.baseline))] : null),
    h('dl', {class: 'deltas'}, deltas(c).map(([k, v, cls]) => h('div', {}, h('dt', {}, k), h('dd', {class: cls}, v)))),
    changes(c));
}

// deltas are a comparison's, as [label, text, class]: better or worse.
export function deltas(c) {
  const d = (v, fmt, lowerIsBetter) => [signed(v, fmt), v === 0 || v === null ? 'same' : (v < 0) === lowerIsBetter ? 'better' : 'worse'];
  return [
    ['Pass rate', ...d(c.pass_rate_delta * 100, (v) => v.toFixed(0) + ' pts', false)],
    ['Steps a task', ...d(c.steps_per_task_delta, num, true)],
    ['Tokens', ...d(c.token_usage_delta, fmtInt, true)],
    ['Cost', ...d(c.cost_usd_delta, (v) => fmtCost(v), true)],
    ['Duration', ...d(c.duration_ms_delta, fmtMs, true)],
  ];
}

// changes lists the case trials that regressed and those fixed.
export function changes(c) {
  const list = (title, keys, cls) => h('div', {class: 'change ' + cls}, h('h3', {}, `${title} (${keys.length})`),
    keys.length ? h('ul', {class: 'plain'}, keys.map((k) => h('li', {}, h('code', {}, k)))) : h('p', {class: 'note'}, 'none'));
  return h('div', {class: 'changes'}, list('Regressions', c.regressions || [], 'regressed'), list('Fixes', c.fixes || [], 'fixed'),
    c.unmatched && c.unmatched.length ? list('In one only', c.unmatched, 'unmatched') : null);
}

// casesTable is the cases × agents, each cell a verdict linked to its
// run; with a comparison, the cells that changed say so.
function casesTable(rep) {
  const keyOf = (cr) => cr.case + '#' + cr.trial;
  const rows = [];
  const byAgent = rep.agents.map((a) => new Map(a.cases.map((cr) => [keyOf(cr), cr])));
  for (const a of rep.agents) for (const cr of a.cases) if (!rows.some((r) => r.key === keyOf(cr))) rows.push({key: keyOf(cr), cr});
  const c = rep.comparison;
  const mark = (ai, key) => c && rep.agents[ai].agent === c.to ? (c.regressions.includes(key) ? 'regressed' : c.fixes.includes(key) ? 'fixed' : '') : '';
  return h('div', {class: 'table-wrap'}, h('table', {class: 'cases-table', 'aria-labelledby': 'cases-title'},
    h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'Case'), rep.agents.map((a) => h('th', {scope: 'col'}, a.agent)))),
    h('tbody', {}, rows.map(({key, cr}) => h('tr', {dataset: {case: key}},
      h('th', {scope: 'row', class: 'case-name'}, cr.case, rep.trials > 1 ? h('span', {class: 'muted'}, ' #' + cr.trial) : null),
      byAgent.map((m, ai) => verdictCell(m.get(key), mark(ai, key))))))));
}

// verdictCell is one case trial of one agent: PASS or FAIL, linked to
// its run, and each failed check's type and reason.
export function verdictCell(cr, change) {
  if (!cr) return h('td', {class: 'verdict-cell'}, h('span', {class: 'muted'}, 'not run'));
  const failed = cr.checks.filter((k) => !k.passed);
  const title = cr.checks.map((k) => `${k.passed ? '✓' : '✗'} ${k.type}${k.reason ? ': ' + k.reason : ''}`).join('\n');
  return h('td', {class: 'verdict-cell' + (change ? ' ' + change : ''), title},
    cr.run_id
      ? h('a', {href: '#/runs/' + encodeURIComponent(cr.run_id), class: 'verdict ' + (cr.passed ? 'v-pass' : 'v-fail'),
        'aria-label': `${cr.passed ? 'passed' : 'failed'}: the trace of run ${cr.run_id}`}, cr.passed ? 'PASS' : 'FAIL')
      : h('span', {class: 'verdict ' + (cr.passed ? 'v-pass' : 'v-fail'), title: 'no stored run'}, cr.passed ? 'PASS' : 'FAIL'),
    change ? h('span', {class: 'change-mark ' + change}, change) : null,
    h('span', {class: 'muted small checks-count'}, ` ${cr.checks.length - failed.length}/${cr.checks.length} checks`),
    cr.error ? h('p', {class: 'error-text small'}, cr.error) : null,
    failed.length ? h('ul', {class: 'checks'}, failed.map((k) => h('li', {},
      h('code', {}, k.type), k.score !== undefined ? h('span', {class: 'muted'}, ` score ${num(k.score)}`) : null,
      k.reason ? h('span', {class: 'reason'}, ' ' + k.reason) : null))) : null);
}

export function pct(x) {
  if (x === null || x === undefined) return '–';
  const p = x * 100;
  return (Number.isInteger(Math.round(p * 10) / 10) ? p.toFixed(0) : p.toFixed(1)) + '%';
}

export function num(x) {
  if (x === null || x === undefined) return '–';
  return Number.isInteger(x) ? String(x) : x.toFixed(2);
}

// signed formats a delta with its sign; null is a delta not known.
export function signed(v, fmt) {
  if (v === null || v === undefined) return 'unknown';
  if (v === 0) return '±0';
  return (v > 0 ? '+' : '−') + fmt(Math.abs(v));
}

// rateClass colours a pass rate: all, most, or few passed.
export function rateClass(r) {
  return r >= 1 ? 'r-all' : r >= 0.5 ? 'r-most' : 'r-few';
}
