// Following a run's events: read the stream, and when it drops before
// the run ends, connect again after the last event seen (Last-Event-ID),
// so that no event is lost or shown twice.

import {api, readEvents} from './api.js';

export class Follower {
  // onEvent(ev) gets each event; onStop(run) the run's summary once the
  // stream is over (the run ended, paused, or stopped); onState(text)
  // how the connection stands ("live", "reconnecting", "").
  constructor(runId, {onEvent, onStop, onState}) {
    this.runId = runId;
    this.onEvent = onEvent;
    this.onStop = onStop;
    this.onState = onState || (() => {});
    this.last = 0;
    this.ctl = null;
  }

  // follow reads from after the last event seen until the run stops.
  async follow() {
    this.stop();
    const ctl = new AbortController();
    this.ctl = ctl;
    let delay = 250;
    while (!ctl.signal.aborted) {
      let ended = false;
      this.onState('live');
      try {
        this.last = await readEvents(this.runId, this.last, (ev) => {
          if (ev.type === 'run_end' && ev.data.run_id === this.runId) ended = true;
          else if (ev.type === 'resume') ended = false;
          this.onEvent(ev);
        }, ctl.signal);
        delay = 250;
      } catch (e) {
        if (ctl.signal.aborted) return;
        if (e.status && e.status !== 503) { this.onState(''); this.onStop(null, e); return; }
      }
      if (ctl.signal.aborted) return;
      // The stream closed: the run ended, or stopped without a run_end,
      // or the connection dropped. The store says which.
      const run = await this.summary(ended, ctl.signal);
      if (run && run.status !== 'running') {
        this.onState('');
        this.onStop(run, null);
        return;
      }
      this.onState('reconnecting');
      await sleep(delay, ctl.signal);
      delay = Math.min(delay * 2, 5000);
    }
  }

  // summary reads the run; after its run_end, until the store has its
  // end too (the Result is written just after the event).
  async summary(ended, signal) {
    for (let i = 0; ; i++) {
      let run = null;
      try { run = await api(`/v1/runs/${encodeURIComponent(this.runId)}`, {signal}); } catch { return null; }
      if (!ended || run.status !== 'running' || i >= 100) return run;
      await sleep(100, signal);
      if (signal.aborted) return null;
    }
  }

  stop() {
    if (this.ctl) this.ctl.abort();
    this.ctl = null;
  }
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, {once: true});
  });
}
