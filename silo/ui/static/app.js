// The Orrery admin UI: it reads the admin endpoint's JSON routes and renders them; pause,
// resume and trigger POST to the schedule's action routes, a lane's pause/resume buttons to its
// queue's, and a peeked message's cancel button to its cancel route. Every request carries the
// bearer token entered in the page (kept in sessionStorage), when there is one.
'use strict';

const refreshMillis = 5000;
const lateAfterMillis = 5000;
const laneMax = 100;
const tokenKey = 'orrery.token';

const ui = {
  namespace: '',
  queue: '',
  state: '',
  labels: [],       // the label filter: KEY=VALUE or KEY
  namePrefix: '',
  after: null,      // next_after of the schedules page shown
  pageAfter: null,  // after of the schedules page shown
  schedules: [],    // {item, inspection, error}
  extraLanes: [],   // lanes added in the form: {queue, key}
  open: new Set(),  // ids of the schedules whose details are shown
  drafts: {},       // schedule id → the backfill form's {from, to} as typed
  busy: false,
  again: false,
};

const $ = (id) => document.getElementById(id);

// el builds an element: attrs are properties (className, dataset.x via 'data-x', on* handlers),
// children are nodes or strings (text, never markup).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null) continue;
    if (k.startsWith('data-') || k === 'title' || k === 'colspan') node.setAttribute(k, v);
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node[k] = v;
  }
  for (const c of children.flat()) {
    if (c == null) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

function setStatus(text, isError) {
  const s = $('status');
  s.textContent = text;
  s.className = isError ? 'error' : 'ok';
}

async function api(method, path) {
  const headers = { Accept: 'application/json' };
  const token = sessionStorage.getItem(tokenKey);
  if (token) headers.Authorization = 'Bearer ' + token;
  const resp = await fetch(path, { method, headers });
  let body = null;
  try { body = await resp.json(); } catch (e) { body = null; }
  if (!resp.ok) {
    const err = body && body.error;
    throw new Error(`${method} ${path}: ${resp.status}` + (err ? ` ${err.code}: ${err.message}` : ''));
  }
  return body;
}

const seg = (s) => encodeURIComponent(s);
const lanePath = (ns, queue, key) => `${seg(ns)}/${seg(queue)}/${seg(key)}`;

// ---- time

const micros = (v) => (v == null ? 0 : Number(v));

// humanTime renders an instant in unix µs as "2006-01-02 15:04:05 UTC"; 0 is none.
function humanTime(us) {
  if (!us) return '—';
  return new Date(us / 1000).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

function duration(ms) {
  let s = Math.round(Math.abs(ms) / 1000);
  if (s < 60) return `${s} s`;
  let m = Math.floor(s / 60); s %= 60;
  if (m < 60) return s ? `${m} min ${s} s` : `${m} min`;
  let h = Math.floor(m / 60); m %= 60;
  if (h < 48) return m ? `${h} h ${m} min` : `${h} h`;
  const d = Math.floor(h / 24); h %= 24;
  return h ? `${d} d ${h} h` : `${d} d`;
}

// relative says how far an instant is from now: "in 3 s" ahead; behind, "late by 3 s" for a
// due instant (kind "due"), "3 s ago" for a past one.
function relative(us, kind) {
  if (!us) return '';
  const ms = us / 1000 - Date.now();
  if (ms >= 0) return `in ${duration(ms)}`;
  return kind === 'due' ? `late by ${duration(ms)}` : `${duration(ms)} ago`;
}

// when is an instant's cell: human time, and its relative time kept current by tick.
function when(us, kind) {
  if (!us) return el('span', { className: 'muted' }, '—');
  return el('span', { className: 'when', title: new Date(us / 1000).toISOString() },
    el('span', { className: 'abs' }, humanTime(us)), ' ',
    el('span', { className: 'rel', 'data-at': us, 'data-kind': kind || 'past' }, relative(us, kind)));
}

function tick() {
  for (const span of document.querySelectorAll('.rel[data-at]')) {
    span.textContent = relative(Number(span.dataset.at), span.dataset.kind);
  }
}

// ---- schedules

function scheduleState(rec) {
  if (rec.cancelled) return 'cancelled';
  if (rec.series_ended) return 'completed';
  if (rec.suspended) return 'suspended';
  if (rec.paused) return 'paused';
  return 'active';
}

function specText(spec) {
  if (!spec) return '';
  if (spec.cron) return `cron "${spec.cron.expression}"` + (spec.cron.time_zone ? ` ${spec.cron.time_zone}` : '');
  if (spec.every) return `every ${duration(micros(spec.every.interval_micros) / 1000)}`;
  if (spec.at) return `at ${humanTime(micros(spec.at.due_at_unix_micros))}`;
  if (spec.after) return `after ${duration(micros(spec.after.delay_micros) / 1000)}`;
  return '';
}

function outcomeName(outcome) {
  return String(outcome || '').replace(/^LEDGER_OUTCOME_/, '').toLowerCase().replace(/_/g, ' ');
}

// lateness is how late a running schedule's next due instant is, or null when it is not late.
function lateness(rec) {
  const due = micros(rec.next_due_at_unix_micros);
  if (!due || rec.paused || rec.cancelled || rec.series_ended) return null;
  const ms = Date.now() - due / 1000;
  return ms > lateAfterMillis ? ms : null;
}

// livenessBadge shows what the due coordinator reports of a schedule: "late" or "failing",
// the reason on hover and below; nothing when it reports nothing.
function livenessBadge(l) {
  if (!l) return null;
  return el('div', { className: 'liveness' },
    el('span', { className: `badge liveness-${l.state}`, title: l.reason }, l.state),
    el('div', { className: 'muted liveness-reason' }, l.reason));
}

async function loadSchedules() {
  if (!ui.namespace) return;
  const q = new URLSearchParams({ max: '50' });
  if (ui.queue) q.set('queue', ui.queue);
  if (ui.state) q.set('state', ui.state);
  for (const l of ui.labels) q.append('label', l);
  if (ui.namePrefix) q.set('name_prefix', ui.namePrefix);
  if (ui.pageAfter) q.set('after', ui.pageAfter);
  const page = await api('GET', `/v1/schedules/${seg(ui.namespace)}?${q}`);
  ui.after = page.next_after;
  ui.schedules = await Promise.all(page.schedules.map(async (item) => {
    const def = item.record.definition;
    const path = `${lanePath(def.lane.namespace, def.lane.queue, def.lane.key)}/${seg(def.schedule_id)}`;
    try {
      return { item, inspection: await api('GET', `/v1/schedules/${path}`) };
    } catch (e) {
      return { item, inspection: null, error: e.message };
    }
  }));
  renderSchedules();
}

function renderSchedules() {
  // A refresh does not redraw the table under a backfill form being typed in.
  const focused = document.activeElement;
  if (focused && focused.closest && focused.closest('form.backfill')) return;
  const body = $('schedules').tBodies[0];
  const rows = [];
  if (ui.schedules.length === 0) {
    rows.push(el('tr', {}, el('td', { colspan: 8, className: 'muted' }, `No schedules in ${ui.namespace}.`)));
  }
  for (const s of ui.schedules) {
    const rec = (s.inspection && s.inspection.record) || s.item.record;
    const def = rec.definition;
    const id = def.schedule_id;
    const state = scheduleState(rec);
    const late = lateness(rec);
    const last = s.inspection && s.inspection.last_outcomes && s.inspection.last_outcomes[0];
    const action = (name, enabled) => el('button', {
      type: 'button', className: `action ${name}`, disabled: !enabled, textContent: name,
      onclick: () => act(name, def),
    });
    rows.push(el('tr', { className: `schedule ${state}`, 'data-schedule-id': id },
      el('td', {},
        el('button', { type: 'button', className: 'link details', textContent: def.name || id, title: id,
          onclick: () => { ui.open.has(id) ? ui.open.delete(id) : ui.open.add(id); renderSchedules(); } }),
        labelsLine(def.labels)),
      el('td', {}, `${def.lane.queue} / ${def.lane.key}`),
      el('td', {}, el('span', { className: `badge ${state}` }, state),
        s.inspection && s.inspection.suspended_reason ? el('div', { className: 'muted' }, s.inspection.suspended_reason) : null),
      el('td', {}, specText(def.spec)),
      el('td', { className: 'next-fire' }, when(micros(rec.next_due_at_unix_micros), 'due')),
      el('td', { className: late == null ? 'lateness' : 'lateness late' }, late == null ? (state === 'active' ? 'on time' : '—') : `late by ${duration(late)}`,
        livenessBadge(s.inspection && s.inspection.liveness)),
      el('td', { className: 'last-outcome' }, last
        ? [el('span', { className: `outcome ${outcomeName(last.outcome).replace(/ /g, '-')}` }, outcomeName(last.outcome)), ' ',
          when(micros(last.nominal_due_at_unix_micros))]
        : el('span', { className: 'muted' }, s.error || 'none')),
      el('td', { className: 'actions' },
        action('pause', state === 'active'), action('resume', state === 'paused'), action('trigger', state !== 'paused' && state !== 'cancelled'),
        stoppedByExpiry(s) ? action('skip-expired', true) : null),
    ));
    if (ui.open.has(id)) rows.push(detailsRow(s, rec));
  }
  body.replaceChildren(...rows);
  $('schedules-more').hidden = !ui.after;
  $('refreshed').textContent = `refreshed ${new Date().toLocaleTimeString()}`;
  renderLanes();
}

function detailsRow(s, rec) {
  const insp = s.inspection || {};
  const fires = (insp.next_fire_times_unix_micros || []).map((us) => el('li', {}, when(micros(us), 'due')));
  const outcomes = (insp.last_outcomes || []).map((o) => el('tr', {},
    el('td', {}, String(o.ordinal)), el('td', {}, outcomeName(o.outcome) + (o.manual ? ' (manual)' : '')),
    el('td', {}, when(micros(o.nominal_due_at_unix_micros))), el('td', {}, when(micros(o.recorded_at_unix_micros))),
    el('td', {}, o.reason || o.message_id || '')));
  const def = rec.definition;
  const generations = (insp.generations || []).map((g) => el('li', {},
    `generation ${g.record.generation}: ${specText(g.record.definition.spec)}, replaced ${humanTime(micros(g.replaced_at_unix_micros))}` +
    `${g.replaced_by ? ` by ${g.replaced_by}` : ''} after ${g.record.next_ordinal || 0} instants`));
  return el('tr', { className: 'details-row' }, el('td', { colspan: 8 },
    el('div', { className: 'details' },
      el('div', {},
        el('h3', {}, 'Next fire times'),
        fires.length ? el('ol', {}, fires) : el('p', { className: 'muted' }, insp.evaluator_mismatch || rec.series_end_reason || 'none ahead'),
        boundsLine(def, rec),
        el('p', { className: 'muted' }, `id ${def.schedule_id} · revision ${rec.revision} · generation ${rec.generation} · partition ${s.item.partition}` +
          (insp.zone_rules_version ? ` · zone rules tzdata ${insp.zone_rules_version}` : '')),
        generations.length ? el('div', { className: 'generations' }, el('h3', {}, 'Replaced generations'), el('ol', {}, generations)) : null,
        el('form', { className: 'backfill', onsubmit: (e) => { e.preventDefault(); backfill(def, e.target); } },
          el('label', {}, 'Backfill from ', draftInput(def.schedule_id, 'from', '2026-12-01T00:00:00Z', true)),
          el('label', {}, ' to ', draftInput(def.schedule_id, 'to', 'now', false)), ' ',
          el('button', { type: 'submit', className: 'action backfill', textContent: 'backfill' }))),
      el('div', {},
        el('h3', {}, 'Last outcomes'),
        outcomes.length
          ? el('table', { className: 'inner' }, el('thead', {}, el('tr', {},
            el('th', {}, 'Ordinal'), el('th', {}, 'Outcome'), el('th', {}, 'Nominal'), el('th', {}, 'Recorded'), el('th', {}, 'Message / reason'))),
          el('tbody', {}, outcomes))
          : el('p', { className: 'muted' }, 'none yet')))));
}

// boundsLine describes a schedule's bounds, jitter and failure policy, why its series ended by
// a bound and why it paused itself; null when there is nothing to say.
function boundsLine(def, rec) {
  const parts = [];
  if (def.start_at_unix_micros) parts.push(`from ${humanTime(micros(def.start_at_unix_micros))}`);
  if (def.end_at_unix_micros) parts.push(`until ${humanTime(micros(def.end_at_unix_micros))}`);
  if (def.max_occurrences) parts.push(`at most ${def.max_occurrences} runs`);
  if (def.pause_on_failure) parts.push('pauses on failure');
  if (def.jitter_micros) parts.push(`jitter ${def.jitter_allow_early ? '±' : '+'}${duration(micros(def.jitter_micros) / 1000)}`);
  if ((def.calendars || []).length) parts.push(`calendars ${def.calendars.join(', ')}`);
  if (!parts.length && !rec.series_end_reason && !rec.paused_reason) return null;
  return el('p', { className: 'muted bounds' }, `bounds: ${parts.join(', ') || 'none'}` +
    (rec.series_end_reason ? ` · ended: ${rec.series_end_reason}` : '') +
    (rec.paused_reason ? ` · paused: ${rec.paused_reason}` : ''));
}

// stoppedByExpiry reports whether the watchdog reports the schedule failing because an
// occurrence outlived its time to live (it waits for skip-expired).
function stoppedByExpiry(s) {
  const l = s.inspection && s.inspection.liveness;
  return !!(l && l.state === 'failing' && /expired/.test(l.reason || ''));
}

// labelsLine shows a schedule's labels as KEY=VALUE, by key; null without any.
function labelsLine(labels) {
  const keys = Object.keys(labels || {}).sort();
  if (!keys.length) return null;
  return el('div', { className: 'muted labels' }, keys.map((k) => `${k}=${labels[k]}`).join(' '));
}

// draftInput is one input of a schedule's backfill form, keeping what is typed across redraws.
function draftInput(id, name, placeholder, required) {
  const draft = ui.drafts[id] || {};
  return el('input', { type: 'text', name, placeholder, required, value: draft[name] || '',
    oninput: (e) => { (ui.drafts[id] ||= {})[name] = e.target.value; } });
}

// backfill runs the schedule's instants between the form's from and to (RFC 3339; to empty:
// now) now, and says how many occurrences it enqueued.
async function backfill(def, form) {
  const q = new URLSearchParams({ from: form.elements.from.value.trim() });
  const to = form.elements.to.value.trim();
  if (to) q.set('to', to);
  const path = `/v1/schedules/${lanePath(def.lane.namespace, def.lane.queue, def.lane.key)}/${seg(def.schedule_id)}/backfill?${q}`;
  try {
    const res = await api('POST', path);
    setStatus(`backfill: ${(res && res.enqueued_ids || []).length} occurrences of ${def.name || def.schedule_id} enqueued`);
  } catch (e) {
    setStatus(e.message, true);
  }
  await refresh();
}

async function act(action, def) {
  const path = `/v1/schedules/${lanePath(def.lane.namespace, def.lane.queue, def.lane.key)}/${seg(def.schedule_id)}/${action}`;
  try {
    await api('POST', path);
    setStatus(`${action}: ${def.name || def.schedule_id} done`);
  } catch (e) {
    setStatus(e.message, true);
  }
  await refresh();
}

// ---- lanes

function lanesShown() {
  const seen = new Map();
  const add = (queue, key) => seen.set(`${queue}\u0000${key}`, { queue, key });
  for (const s of ui.schedules) add(s.item.record.definition.lane.queue, s.item.record.definition.lane.key);
  for (const l of ui.extraLanes) add(l.queue, l.key);
  return [...seen.values()].sort((a, b) => (a.queue + '\u0000' + a.key).localeCompare(b.queue + '\u0000' + b.key));
}

const laneStats = new Map(); // "queue\0key" -> {live, dead, error}
const queueStats = new Map(); // queue -> GET /v1/queues/{ns}/{queue} (its pause per partition)
const peeked = new Set(); // "queue\0key" of the lanes whose messages are shown

async function loadLanes() {
  if (!ui.namespace) return;
  const queues = [...new Set(lanesShown().map((l) => l.queue))];
  await Promise.all(queues.map(async (q) => {
    try {
      queueStats.set(q, await api('GET', `/v1/queues/${seg(ui.namespace)}/${seg(q)}`));
    } catch (e) {
      queueStats.set(q, { error: e.message });
    }
  }));
  await Promise.all(lanesShown().map(async (l) => {
    const stats = {};
    try {
      stats.live = await api('GET', `/v1/lanes/${lanePath(ui.namespace, l.queue, l.key)}?max=${laneMax}`);
      stats.dead = await api('GET', `/v1/lanes/${lanePath(ui.namespace, l.queue + '$dlq', l.key)}?max=${laneMax}`);
    } catch (e) {
      stats.error = e.message;
    }
    laneStats.set(`${l.queue}\u0000${l.key}`, stats);
  }));
  renderLanes();
}

function depth(page) {
  return page ? `${page.messages.length}${page.next_after ? '+' : ''}` : '…';
}

// queuePause says whether a queue is paused on some partitions: {paused, all, reason}.
function queuePause(queue) {
  const q = queueStats.get(queue);
  if (!q || !q.partitions) return { paused: false };
  const pauses = q.partitions.map((p) => p.stats && p.stats.pause).filter((p) => p);
  return { paused: pauses.length > 0, all: pauses.length === q.partitions.length, reason: pauses.length ? pauses[0].reason : '' };
}

// queueRetry describes a queue's retry policy: {text, title} of the lowest partition that has
// one (and whether not every partition has it), or null when none has.
function queueRetry(queue) {
  const q = queueStats.get(queue);
  if (!q || !q.retry_policy || !q.retry_policy.policy) return null;
  const p = q.retry_policy.policy;
  const ms = (v) => duration(Number(v || 0) / 1000);
  const attempts = p.max_attempts ? `${p.max_attempts} attempts` : 'max deliveries';
  const then = p.on_exhausted === 'RETRY_EXHAUSTED_DROP' ? 'drop' : 'dead-letter';
  const text = `retry: ${attempts}, backoff ${ms(p.initial_backoff_micros)}→${ms(p.max_backoff_micros)}` +
    (p.jitter_percent ? ` −${p.jitter_percent}%` : '') + `, then ${then}`;
  const partial = q.retry_policy_partitions < (q.partitions || []).length;
  return { text: partial ? `${text} (on some partitions)` : text, title: `set by ${q.retry_policy.set_by}` };
}

// queueLimits renders a capped queue's cluster-wide limits and the leases its shares count
// now ("cap 2 leased · 5/s · 1 leased now"), or '' when it is not capped.
function queueLimits(queue) {
  const q = queueStats.get(queue);
  const limits = q && q.limits;
  if (!limits || !limits.policy) return '';
  const parts = [];
  if (limits.policy.max_leased) parts.push(`cap ${limits.policy.max_leased} leased`);
  if (limits.policy.per_second) parts.push(`${limits.policy.per_second}/s`);
  parts.push(`${limits.leased_now} leased now`);
  return parts.join(' · ');
}

function renderLanes() {
  const rows = [];
  for (const l of lanesShown()) {
    const id = `${l.queue}\u0000${l.key}`;
    const st = laneStats.get(id) || {};
    const msgs = (st.live && st.live.messages) || [];
    const now = Date.now() * 1000;
    const leased = msgs.filter((m) => m.lease && micros(m.lease.until_unix_micros) > now).length;
    const oldest = msgs.reduce((min, m) => Math.min(min, micros(m.enqueued_at_unix_micros)), Infinity);
    const pause = queuePause(l.queue);
    const retry = queueRetry(l.queue);
    const limits = queueLimits(l.queue);
    rows.push(el('tr', { 'data-lane': `${l.queue}/${l.key}` },
      el('td', {}, `${l.queue} / ${l.key}`, pause.paused
        ? el('span', { className: 'badge paused', title: pause.reason || '' }, pause.all ? ' queue paused' : ' queue paused on some partitions')
        : null, retry ? el('span', { className: 'badge retry-policy', title: retry.title }, retry.text) : null,
        limits ? el('span', { className: 'badge limits', title: 'cluster-wide limits (orrery queues limit)' }, ` ${limits}`) : null),
      el('td', { className: 'depth' }, st.error ? el('span', { className: 'error' }, st.error) : depth(st.live)),
      el('td', {}, st.live ? String(leased) : ''),
      el('td', {}, Number.isFinite(oldest) ? when(oldest) : el('span', { className: 'muted' }, '—')),
      el('td', { className: st.dead && st.dead.messages.length ? 'dlq late' : 'dlq' }, depth(st.dead)),
      el('td', {},
        el('button', { type: 'button', className: 'link', textContent: peeked.has(id) ? 'hide' : 'peek', onclick: () => peek(l) }), ' ',
        pause.paused
          ? el('button', { type: 'button', className: 'action queue-resume', textContent: 'resume queue', onclick: () => queueAct('resume', l.queue) })
          : el('button', { type: 'button', className: 'action queue-pause', textContent: 'pause queue', onclick: () => queueAct('pause', l.queue) }))));
    if (peeked.has(id)) rows.push(messagesRow(l, msgs));
  }
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: 6, className: 'muted' }, 'No lanes yet.')));
  $('lanes').tBodies[0].replaceChildren(...rows);
}

// messagesRow lists a peeked lane's live messages, each with its priority, its unique key (if
// it took one), its attempts, its last failure (when and the error) and a cancel button.
function messagesRow(l, msgs) {
  const now = Date.now() * 1000;
  const items = msgs.map((m) => {
    const state = m.cancelled ? 'cancelled, lease revoked'
      : (m.lease && micros(m.lease.until_unix_micros) > now ? 'leased' : 'waiting');
    return el('li', { 'data-message-id': m.id },
      `${m.id} · ${state} · priority ${m.priority || 0} · deliveries ${m.delivery_count} · visible ${humanTime(micros(m.visible_at_unix_micros))} `,
      m.unique_key ? el('span', { className: 'unique-key', title: 'unique key: another enqueue with it is skipped as a duplicate' }, `· unique key ${m.unique_key} `) : null,
      micros(m.last_failed_at_unix_micros) > 0
        ? el('span', { className: 'last-failure error' }, `· failed ${humanTime(micros(m.last_failed_at_unix_micros))}: ${m.last_error || '(no error given)'} `)
        : null,
      m.cancelled ? null : el('button', { type: 'button', className: 'action cancel-message', textContent: 'cancel',
        onclick: () => cancelMessage(l, m.id) }));
  });
  return el('tr', { className: 'messages-row', 'data-lane': `${l.queue}/${l.key}` },
    el('td', { colspan: 6 }, items.length ? el('ul', {}, items) : el('span', { className: 'muted' }, 'no live messages')));
}

// queueAct pauses or resumes a queue's consumption on every partition.
async function queueAct(action, queue) {
  let path = `/v1/queues/${seg(ui.namespace)}/${seg(queue)}/${action}`;
  if (action === 'pause') {
    const reason = window.prompt(`Pause queue ${queue}: reason (optional)`, '');
    if (reason === null) return;
    if (reason) path += `?reason=${encodeURIComponent(reason)}`;
  }
  try {
    await api('POST', path);
    setStatus(`queue ${queue} ${action === 'pause' ? 'paused' : 'resumed'} on every partition`);
  } catch (e) {
    setStatus(e.message, true);
  }
  await refresh();
}

// cancelMessage cancels a message by id: removed, or its lease revoked when it is leased.
async function cancelMessage(l, id) {
  const path = `/v1/lanes/${lanePath(ui.namespace, l.queue, l.key)}/messages/${seg(id)}/cancel`;
  try {
    const res = await api('POST', path);
    const said = { CANCEL_OUTCOME_REMOVED: 'removed', CANCEL_OUTCOME_LEASE_REVOKED: 'lease revoked, removed when it ends',
      CANCEL_OUTCOME_ALREADY_DONE: 'already cancelled or removed' };
    setStatus(`cancel ${id}: ${said[res.outcome] || res.outcome}`);
  } catch (e) {
    setStatus(e.message, true);
  }
  await refresh();
}

function peek(l) {
  const id = `${l.queue}\u0000${l.key}`;
  if (peeked.has(id)) peeked.delete(id); else peeked.add(id);
  renderLanes();
  const st = laneStats.get(id) || {};
  const lines = [];
  for (const [label, page] of [['live', st.live], ['dead letters', st.dead]]) {
    for (const m of (page && page.messages) || []) {
      lines.push(`${label}\t${m.id}\tpriority ${m.priority || 0}\tdeliveries ${m.delivery_count}\tvisible ${humanTime(micros(m.visible_at_unix_micros))}\t${m.payload_json || ''}` +
        (m.last_error ? `\tlast error: ${m.last_error}` : ''));
    }
  }
  setStatus(lines.length ? `${l.queue} / ${l.key}:\n${lines.join('\n')}` : `${l.queue} / ${l.key}: empty`);
}

// ---- sagas

async function loadSagas() {
  if (!ui.namespace) return;
  const q = new URLSearchParams({ max: '50' });
  if (ui.queue) q.set('queue', ui.queue);
  const page = await api('GET', `/v1/sagas/${seg(ui.namespace)}?${q}`);
  const rows = page.sagas.map((s) => {
    const rec = s.record;
    return el('tr', { 'data-saga-id': rec.saga_id },
      el('td', {}, rec.saga_id), el('td', {}, `${rec.lane.queue} / ${rec.lane.key}`),
      el('td', {}, el('span', { className: `badge ${s.phase}` }, s.phase)),
      el('td', {}, when(micros(rec.deadline_unix_micros), s.phase === 'waiting' ? 'due' : 'past')),
      el('td', {}, String(rec.revision)));
  });
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: 5, className: 'muted' }, `No sagas in ${ui.namespace}.`)));
  $('sagas').tBodies[0].replaceChildren(...rows);
}

// ---- calendars

// calendarExcludes says what a calendar excludes: its dates, ranges and cron exclusions.
function calendarExcludes(c) {
  const parts = [];
  parts.push(...(c.excluded_dates || []));
  parts.push(...(c.excluded_ranges || []).map((r) => `${r.from}..${r.to}`));
  parts.push(...(c.excluded_crons || []).map((e) => `cron ${e}`));
  return parts.join(', ') || 'nothing';
}

async function loadCalendars() {
  if (!ui.namespace) return;
  const page = await api('GET', `/v1/calendars/${seg(ui.namespace)}?max=100`);
  const rows = page.calendars.map((rec) => {
    const c = rec.calendar;
    return el('tr', { 'data-calendar': c.name },
      el('td', {}, c.name), el('td', {}, c.time_zone || 'UTC'), el('td', {}, calendarExcludes(c)),
      el('td', {}, c.description || ''), el('td', {}, `${humanTime(micros(rec.put_at_unix_micros))} by ${rec.put_by}`));
  });
  if (rows.length === 0) rows.push(el('tr', {}, el('td', { colspan: 5, className: 'muted' }, `No calendars in ${ui.namespace}.`)));
  $('calendars').tBodies[0].replaceChildren(...rows);
}

// ---- partitions

// consistency renders a partition leader's last consistency check: the divergent replicas in
// red, the missing ones, or that every replica agreed.
function consistency(check) {
  if (!check) return el('span', { className: 'muted' }, 'not checked yet');
  const at = `at index ${check.index}`;
  if ((check.divergent || []).length > 0 || !check.consistent) {
    return el('span', { className: 'error' }, `DIVERGENT ${(check.divergent || []).join(', ') || '(no majority)'} ${at}`);
  }
  if ((check.missing || []).length > 0) return `consistent, ${check.missing.join(', ')} missing, ${at}`;
  return `consistent ${at}`;
}

async function loadPartitions() {
  const table = await api('GET', '/v1/partitions');
  $('silo').textContent = `silo ${table.silo} (${table.silo_id}) · leads ${table.owned_here.length} of ${table.partitions.length} partitions`;
  const rows = table.partitions.map((p) => {
    const r = p.replica || {};
    const st = p.status || {};
    return el('tr', { 'data-partition': p.partition },
      el('td', {}, String(p.partition)),
      el('td', {}, (r.leader_silo || '—') + (r.leads ? ' (here)' : '')),
      el('td', {}, r.term == null ? '' : String(r.term)),
      el('td', {}, r.applied_index == null ? '' : String(r.applied_index)),
      el('td', {}, (r.voters || []).join(', ')),
      el('td', {}, (r.learners || []).join(', ') || '—'),
      el('td', {}, p.error ? el('span', { className: 'error' }, p.error) : when(micros(st.logged_time_unix_micros))),
      el('td', {}, when(micros(st.next_due_at_unix_micros), 'due')),
      el('td', {}, st.pending_commands == null ? '' : String(st.pending_commands)),
      el('td', {}, consistency(st.last_check)));
  });
  $('partitions').tBodies[0].replaceChildren(...rows);
}

// ---- wiring

// refresh reloads every section; a refresh asked for while one runs runs once it ends.
async function refresh() {
  if (ui.busy) {
    ui.again = true;
    return;
  }
  ui.busy = true;
  try {
    do {
      ui.again = false;
      const results = await Promise.allSettled([
        loadSchedules().then(loadLanes), loadSagas(), loadCalendars(), loadPartitions()]);
      const failed = results.find((r) => r.status === 'rejected');
      if (failed) setStatus(failed.reason.message, true);
    } while (ui.again);
  } finally {
    ui.busy = false;
  }
}

function readForm() {
  ui.namespace = $('namespace').value.trim();
  ui.queue = $('queue').value.trim();
  ui.state = $('state').value;
  ui.labels = $('labels').value.split(',').map((l) => l.trim()).filter((l) => l);
  ui.namePrefix = $('name-prefix').value.trim();
  ui.pageAfter = null;
  const params = new URLSearchParams({ namespace: ui.namespace });
  if (ui.queue) params.set('queue', ui.queue);
  if (ui.state) params.set('state', ui.state);
  if (ui.labels.length) params.set('labels', ui.labels.join(','));
  if (ui.namePrefix) params.set('name_prefix', ui.namePrefix);
  history.replaceState(null, '', `?${params}`);
}

function init() {
  const params = new URLSearchParams(location.search);
  $('namespace').value = params.get('namespace') || '';
  $('queue').value = params.get('queue') || '';
  $('state').value = params.get('state') || '';
  $('labels').value = params.get('labels') || '';
  $('name-prefix').value = params.get('name_prefix') || '';
  $('token').value = sessionStorage.getItem(tokenKey) || '';
  if ($('namespace').value) readForm();

  $('schedules-form').addEventListener('submit', (e) => {
    e.preventDefault();
    readForm();
    setStatus('');
    refresh();
  });
  $('schedules-more').addEventListener('click', () => { ui.pageAfter = ui.after; refresh(); });
  $('lane-form').addEventListener('submit', (e) => {
    e.preventDefault();
    ui.extraLanes.push({ queue: $('lane-queue').value.trim(), key: $('lane-key').value.trim() });
    refresh();
  });
  $('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const token = $('token').value.trim();
    if (token) sessionStorage.setItem(tokenKey, token); else sessionStorage.removeItem(tokenKey);
    setStatus(token ? 'token set for this tab' : 'token cleared');
    refresh();
  });
  $('token-clear').addEventListener('click', () => {
    $('token').value = '';
    sessionStorage.removeItem(tokenKey);
    setStatus('token cleared');
  });

  refresh();
  setInterval(refresh, refreshMillis);
  setInterval(tick, 1000);
}

init();
