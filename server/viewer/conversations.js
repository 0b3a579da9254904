// Conversations: their list (GET /v1/conversations), and one shown as a
// chat (GET /v1/conversations/ID): each message and its answer, linked
// to its run's trace, and a composer that says something (POST
// .../messages), streams the answer as it is written, and asks about the
// calls it waits for, inline.

import {api} from './api.js';
import {Follower} from './live.js';
import {h, fill, fmtTime, relTime, shortId, badge, rowKeys, oneLine} from './util.js';

const PAGE = 25;

// mountConversations shows the list in root; it answers its unmount.
export function mountConversations(root, query, focusId, me) {
  const st = {cursors: [''], list: [], next: '', gone: false, error: '', agents: []};
  const body = h('tbody', {});
  const pager = h('nav', {class: 'pager', 'aria-label': 'Pages'});
  const status = h('p', {class: 'list-status', role: 'status', 'aria-live': 'polite'});
  const newSlot = h('div', {class: 'new-conversation'});
  const cols = ['Conversation', 'Agent', 'Runs', 'Updated'];
  fill(root, h('section', {class: 'runs conversations', 'aria-labelledby': 'conversations-title'},
    h('div', {class: 'title-row'}, h('h1', {id: 'conversations-title', tabindex: -1}, 'Conversations'), status),
    h('p', {class: 'note'}, 'A conversation is a series of runs that remember what was said: open one to read it as a chat, and to say something.'),
    newSlot,
    h('div', {class: 'table-wrap'}, h('table', {class: 'runs-table conversations-table'}, h('caption', {class: 'sr-only'}, 'Conversations, most recently updated first'),
      h('thead', {}, h('tr', {}, cols.map((c, i) => h('th', {scope: 'col', class: i === 2 ? 'num' : ''}, c)))), body)),
    pager));

  const page = () => st.cursors.length - 1;
  function render() {
    fill(body, st.list.length ? st.list.map(row) : h('tr', {}, h('td', {colspan: cols.length, class: 'empty'},
      st.error || 'No conversation yet: start one below, or with agentry chat.')));
    if (focusId) { const tr = body.querySelector(`tr[data-conv-id="${CSS.escape(focusId)}"]`); if (tr) tr.focus(); focusId = ''; }
    fill(pager, h('button', {type: 'button', disabled: page() === 0, onclick: () => { st.cursors.pop(); load(); }}, '← Newer'),
      h('span', {class: 'muted'}, 'page ' + (page() + 1)),
      h('button', {type: 'button', disabled: !st.next, onclick: () => { st.cursors.push(st.next); load(); }}, 'Older →'));
    status.textContent = st.error ? '' : `${st.list.length} conversation${st.list.length === 1 ? '' : 's'}`;
  }

  // The form that starts a conversation with a served agent: a runner's.
  async function renderNew() {
    if (me.role !== 'runner' && me.role !== 'admin') return;
    try { st.agents = (await api('/v1/agents')).agents || []; } catch { return; }
    if (st.gone || !st.agents.length) return;
    const select = h('select', {id: 'new-agent'}, st.agents.map((a) => h('option', {value: a.name + '@' + a.version}, a.name + '@' + a.version)));
    const note = h('span', {class: 'muted', role: 'status'});
    fill(newSlot, h('form', {class: 'actions', onsubmit: async (e) => {
      e.preventDefault();
      try {
        const c = await api('/v1/conversations', {method: 'POST', body: {agent: select.value}});
        location.hash = '#/conversations/' + encodeURIComponent(c.id);
      } catch (err) { note.textContent = 'It could not be started: ' + err.message; }
    }}, h('label', {for: 'new-agent'}, 'Talk with'), select, h('button', {type: 'submit', class: 'primary'}, 'New conversation'), note));
  }

  async function load() {
    const q = new URLSearchParams({limit: PAGE});
    if (st.cursors[page()]) q.set('cursor', st.cursors[page()]);
    try {
      const res = await api('/v1/conversations?' + q);
      if (st.gone) return;
      Object.assign(st, {list: res.conversations, next: res.next_cursor || '', error: ''});
    } catch (e) {
      if (st.gone) return;
      st.error = 'The conversations could not be read: ' + e.message;
    }
    render();
  }

  const open = (tr) => { location.hash = '#/conversations/' + encodeURIComponent(tr.dataset.convId); };
  body.addEventListener('keydown', (e) => rowKeys(e, 'tr[data-conv-id]', open));
  body.addEventListener('click', (e) => {
    const tr = e.target.closest('tr[data-conv-id]');
    if (tr && !e.target.closest('a')) open(tr);
  });
  load();
  renderNew();
  return () => { st.gone = true; };
}

function row(c) {
  return h('tr', {tabindex: 0, class: 'row', dataset: {convId: c.id}, 'aria-label': `conversation ${c.id}, ${c.runs} runs, updated ${fmtTime(c.updated_at)}`},
    h('td', {}, h('a', {href: '#/conversations/' + encodeURIComponent(c.id), tabindex: -1}, h('code', {}, shortId(c.id))),
      c.forked_from ? h('span', {class: 'tag', title: 'forked from ' + c.forked_from}, 'fork') : null),
    h('td', {class: 'c-agent'}, c.agent || h('span', {class: 'muted'}, '–')),
    h('td', {class: 'num'}, String(c.runs)),
    h('td', {class: 'nowrap', title: fmtTime(c.updated_at)}, relTime(c.updated_at)));
}

// mountConversation shows one conversation as a chat in root; it
// answers its unmount.
export function mountConversation(root, id, me) {
  const st = {conv: null, error: '', gone: false, follower: null, live: null, sending: false, notice: ''};
  const log = h('ol', {class: 'chat', 'aria-live': 'polite', 'aria-label': 'The conversation'});
  const head = h('div', {class: 'title-row'});
  const composer = h('div', {class: 'composer-slot'});
  fill(root, h('section', {class: 'conversation', 'aria-labelledby': 'conversation-title'},
    h('p', {class: 'crumbs'}, h('a', {href: '#/conversations'}, '← Conversations')), head, log, composer));

  const mine = () => st.conv && (me.role === 'runner' || me.role === 'admin') && (st.conv.user || '') === (me.name || '');

  function renderHead() {
    const c = st.conv;
    fill(head, h('h1', {id: 'conversation-title', tabindex: -1}, 'Conversation ', h('code', {}, shortId(id))),
      c ? h('span', {class: 'muted'}, `${c.agent || ''} · ${c.runs} run${c.runs === 1 ? '' : 's'}`) : null,
      c && c.forked_from ? h('span', {class: 'tag', title: 'from run ' + c.forked_at}, 'forked from ',
        h('a', {href: '#/conversations/' + encodeURIComponent(c.forked_from)}, shortId(c.forked_from))) : null);
  }

  function renderLog() {
    const turns = (st.conv ? st.conv.turns || [] : []).filter((t) => !st.live || t.run_id !== st.live.runId);
    const items = turns.map(turnItems).flat();
    if (st.live) items.push(...liveItems(st.live));
    fill(log, items.length ? items : h('li', {class: 'empty'}, st.error || 'Nothing was said yet.'));
  }

  function renderComposer() {
    if (!mine()) {
      fill(composer, st.conv ? h('p', {class: 'note'}, me.role === 'viewer'
        ? 'Your key may read this conversation; its own runner key speaks in it.'
        : `This conversation is ${st.conv.user ? st.conv.user + "'s" : "the local operator's"}: only its own user speaks in it.`) : null);
      return;
    }
    if (composer.querySelector('textarea')) { renderNotice(); return; } // a person may be typing
    const text = h('textarea', {id: 'message', rows: 2, placeholder: 'Say something…', autocomplete: 'off',
      onkeydown: (e) => { if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); send(text, ''); } }});
    fill(composer, h('form', {class: 'composer', onsubmit: (e) => { e.preventDefault(); send(text, ''); }},
      h('label', {for: 'message', class: 'sr-only'}, 'Message'), text,
      h('button', {type: 'submit', class: 'primary', id: 'send'}, 'Send')),
    h('div', {class: 'composer-notice'}));
    renderNotice();
  }

  function renderNotice() {
    const slot = composer.querySelector('.composer-notice');
    if (!slot) return;
    const send = composer.querySelector('#send');
    if (send) send.disabled = st.sending;
    const busy = st.busy;
    fill(slot, st.notice ? h('p', {class: 'notice', role: 'status'}, st.notice) : null,
      busy ? h('div', {class: 'actions'},
        h('button', {type: 'button', onclick: () => sendText(busy.text, 'queue')}, 'Send after it'),
        h('button', {type: 'button', class: 'deny', onclick: () => sendText(busy.text, 'interrupt')}, 'Interrupt it')) : null);
  }

  function send(textarea, ifBusy) {
    const text = textarea.value.trim();
    if (!text || st.sending) return;
    textarea.value = '';
    sendText(text, ifBusy);
  }

  async function sendText(text, ifBusy) {
    st.sending = true;
    st.busy = null;
    st.notice = ifBusy === 'queue' ? 'Waiting for the run that goes on…' : '';
    st.live = {message: text, said: new Map(), tools: [], calls: [], waiting: [], runId: ''};
    renderLog();
    renderNotice();
    try {
      const body = {message: text};
      if (ifBusy) body.if_busy = ifBusy;
      const started = await api(`/v1/conversations/${encodeURIComponent(id)}/messages`, {method: 'POST', body});
      if (st.gone) return;
      st.live.runId = started.run_id;
      st.notice = '';
      if (st.conv) { st.conv.runs++; renderHead(); }
      follow(started.run_id);
    } catch (e) {
      st.live = null;
      st.sending = false;
      if (e.code === 'conversation_busy') {
        st.busy = {text};
        st.notice = 'A run of this conversation goes on.';
      } else {
        st.notice = 'It was not sent: ' + e.message;
      }
      renderLog();
      renderNotice();
    }
  }

  // follow streams the answer of the run as it is written, and, once it
  // stops, shows what it waits for or reads the conversation again.
  function follow(runId) {
    if (st.follower) st.follower.stop();
    st.follower = new Follower(runId, {
      onEvent: (ev) => {
        if (!st.live || ev.data.parent_run_id) return;
        const said = st.live.said;
        if (ev.type === 'content_chunk') said.set(ev.data.turn, (said.get(ev.data.turn) || '') + (ev.data.content || ''));
        else if (ev.type === 'thinking' && ev.data.content && !said.get(ev.data.turn)) said.set(ev.data.turn, ev.data.content);
        else if (ev.type === 'tool_call_start' && ev.data.tool && !st.live.tools.includes(ev.data.tool.id)) {
          st.live.tools.push(ev.data.tool.id);
          st.live.calls.push(ev.data.tool.name);
        }
        else return;
        renderLog();
      },
      onStop: async (run) => {
        if (st.gone) return;
        if (run && run.status === 'awaiting_approval') {
          st.live.waiting = (run.result && run.result.waiting) || [];
          st.live.runId = runId;
          renderLog();
          return;
        }
        st.live = null;
        st.sending = false;
        await load();
        renderNotice();
      },
    });
    st.follower.follow();
  }

  async function decide(runId, approve, deny) {
    const body = {};
    if (approve.length) body.approve = approve;
    if (deny.length) body.deny = deny;
    st.live.waiting = [];
    renderLog();
    try {
      await api(`/v1/runs/${encodeURIComponent(runId)}/resume`, {method: 'POST', body});
      follow(runId);
    } catch (e) {
      st.notice = 'The run did not go on: ' + e.message;
      renderNotice();
    }
  }

  // liveItems are the message being answered: what was said, and what the
  // agent says as it comes, turn by turn (its words before each call, the
  // answer as the model writes it), the calls it made, those it waits for.
  function liveItems(live) {
    const waiting = live.waiting.length ? h('div', {class: 'approval inline', role: 'group', 'aria-label': 'Calls waiting for approval'},
      live.waiting.map((w) => h('div', {class: 'call'}, h('strong', {}, w.tool), ' ', h('code', {class: 'muted'}, oneLine(w.arguments, 120)),
        h('div', {class: 'actions'},
          h('button', {type: 'button', class: 'approve', onclick: () => decide(live.runId, [w.key], [])}, 'Approve'),
          h('button', {type: 'button', class: 'deny', onclick: () => decide(live.runId, [], [w.key])}, 'Deny'))))) : null;
    return [h('li', {class: 'msg user'}, h('p', {class: 'text'}, live.message)),
      h('li', {class: 'msg agent live', 'aria-busy': live.waiting.length ? null : 'true'},
        [...live.said.keys()].sort((a, b) => a - b).map((turn) => h('p', {class: 'text'}, live.said.get(turn))),
        live.calls.length ? h('p', {class: 'tools muted'}, live.calls.map((t) => '→ ' + t).join('  ')) : null,
        live.said.size || live.waiting.length ? null : h('p', {class: 'text muted'}, '…'), waiting)];
  }

  async function load() {
    try {
      st.conv = await api(`/v1/conversations/${encodeURIComponent(id)}`);
      st.error = '';
    } catch (e) {
      st.error = e.status === 404 ? `No conversation ${id}.` : 'The conversation could not be read: ' + e.message;
    }
    if (st.gone) return;
    adopt();
    renderHead();
    renderLog();
    renderComposer();
  }

  // adopt follows the conversation's newest run, when it goes on or waits
  // for approval and this page did not start it (it was opened again, or
  // the run began elsewhere): its answer streams, its calls are asked
  // about, as if it had been sent from here.
  function adopt() {
    const turns = (st.conv && st.conv.turns) || [];
    const last = turns[turns.length - 1];
    if (st.live || !mine() || !last || (last.status !== 'running' && last.status !== 'awaiting_approval')) return;
    st.live = {message: messageText(last.message), said: new Map(), tools: [], calls: [], waiting: [], runId: last.run_id};
    st.sending = true;
    follow(last.run_id);
  }

  renderHead();
  load();
  return () => { st.gone = true; if (st.follower) st.follower.stop(); };
}

// turnItems are a stored run of the conversation as two messages: what
// was said, and the answer, linked to the run's trace.
function turnItems(t) {
  const answer = t.answer === undefined || t.answer === null ? '' : typeof t.answer === 'string' ? t.answer : JSON.stringify(t.answer, null, 2);
  return [h('li', {class: 'msg user'}, h('p', {class: 'text'}, messageText(t.message))),
    h('li', {class: 'msg agent'},
      t.error ? h('p', {class: 'error-box'}, t.error) : null,
      answer ? h('p', {class: 'text'}, answer) : (t.status === 'completed' || t.error ? null : h('p', {class: 'muted'}, t.status.replaceAll('_', ' '))),
      h('p', {class: 'meta'}, t.status !== 'completed' ? badge(t.status) : null, ' ',
        h('a', {href: '#/runs/' + encodeURIComponent(t.run_id), class: 'trace-link', title: 'the run\'s trace'}, 'trace ', h('code', {}, shortId(t.run_id)))))];
}

// messageText is a run's message as the chat shows it: its text, or the
// JSON of an input of several keys.
function messageText(m) {
  return typeof m === 'string' ? m : JSON.stringify(m);
}
