// Merchandiser console: plain JavaScript over promo-admin's API (api/openapi.yaml).
// The API decides and validates everything; the page only sends what was typed
// and shows the API's answer, an error next to the field the API names.
'use strict';

const TOKEN_KEY = 'flashsale.console.token';
const POLL_MS = 1000;          // live counters of each visible promotion
const SWITCHES_MS = 2000;      // the switches view
const LIST_MS = 15000;         // the list itself (new promotions, states)
const TIMELINE_MS = 5000;      // the selected promotion's sale from the record
const QUEUE_MS = 5000;         // the approval queue
const WINDOW_MS = 60000;       // the grab-rate chart's span
const PAGE_SIZE = 20;

const $ = (sel, root = document) => root.querySelector(sel);

const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || '',
  rows: new Map(),    // key "promoId/type" -> row (see rowFor)
  order: [],          // keys of the page shown, newest first
  cursor: '',         // cursor of the page shown ('' = first)
  nextCursor: '',
  selected: '',
  timers: [],
  generation: 0,      // bumped on sign-out so late answers are dropped
  queue: newQueue(),  // the approval queue's view (see loadProposals)
  who: null,          // GET /v1/whoami of the token: {name, role}
};

// What each role may do, as api/openapi.yaml's security says: the page offers
// only that (the service still decides every request by the token's role).
const ROLE_CAN = {
  merchandiser: { promotions: true, write: true, switches: true, queue: true, decide: false },
  viewer: { promotions: true, write: false, switches: true, queue: true, decide: false },
  oncall: { promotions: false, write: false, switches: true, queue: false, decide: false },
  approver: { promotions: true, write: false, switches: false, queue: true, decide: true },
};

// can says whether the signed-in token's role may do what; an unknown role may
// do nothing here.
const can = (what) => !!(state.who && ROLE_CAN[state.who.role] && ROLE_CAN[state.who.role][what]);

function newQueue() {
  return { cursor: '', nextCursor: '', decides: false, errors: new Map() };
}

// ---------------------------------------------------------------- API

class APIError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.code = (body && body.code) || '';
    this.field = (body && body.field) || '';
  }
}

async function api(method, path, body) {
  return (await send(method, path, body)).data;
}

// send is api with the answer's status: a create or a change answered 202 is a
// proposal waiting for an approver, not applied.
async function send(method, path, body) {
  const gen = state.generation;
  const init = { method, headers: { Authorization: `Bearer ${state.token}` } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new APIError(0, { code: 'NETWORK', message: `promo-admin did not answer (${e.message})` });
  }
  let data = null;
  if (res.status !== 204) {
    try { data = await res.json(); } catch { data = null; }
  }
  if (gen !== state.generation) throw new APIError(0, { code: 'SIGNED_OUT', message: 'signed out' });
  if (res.status === 401 && state.token) {
    signOut(`The service refused the token: ${(data && data.message) || 'unauthorized'}. Sign in again.`);
    throw new APIError(401, { code: 'SIGNED_OUT', message: 'signed out' });
  }
  if (!res.ok) throw new APIError(res.status, data);
  return { status: res.status, data };
}

const promoPath = (p) => `/v1/promotions/${encodeURIComponent(p.promoId)}/${encodeURIComponent(p.type)}`;
const keyOf = (p) => `${p.promoId}/${p.type}`;

// ---------------------------------------------------------------- utilities

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

const fmtInt = (n) => (typeof n === 'number' ? n.toLocaleString('en-US') : '–');
const fmtRate = (r) => (r === null || r === undefined ? '–' : r < 10 ? r.toFixed(1) : String(Math.round(r)));

function fmtTime(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// toLocalInput renders a time for a datetime-local input (local time, seconds).
function toLocalInput(d) {
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// fromLocalInput turns a datetime-local value into RFC 3339 (UTC); '' stays absent.
function fromLocalInput(v) {
  if (!v) return undefined;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? v : d.toISOString();
}

// number sends an integer as a JSON number and anything else as typed, so that the
// API, not the page, says what is wrong with it. '' is absent.
function number(v) {
  v = v.trim();
  if (v === '') return undefined;
  return /^-?\d+$/.test(v) ? Number(v) : v;
}

function say(msg, bad = false) {
  const s = $('#status');
  s.textContent = msg;
  s.classList.toggle('bad', bad);
}

// ---------------------------------------------------------------- form errors

function clearErrors(form) {
  for (const p of form.querySelectorAll('[data-error-for]')) p.textContent = '';
  for (const i of form.querySelectorAll('[aria-invalid]')) i.removeAttribute('aria-invalid');
}

// showError puts the API's message next to the field it names, or at the form's
// foot when it names none this form has.
function showError(form, err, fieldFor = {}) {
  clearErrors(form);
  const field = err.field || fieldFor[err.code] || '';
  const input = field && form.elements.namedItem(field);
  const slot = input && form.querySelector(`[data-error-for="${CSS.escape(field)}"]`);
  if (slot) {
    slot.textContent = err.message;
    input.setAttribute('aria-invalid', 'true');
    input.focus();
    return;
  }
  const where = err.field ? `${err.field}: ` : '';
  form.querySelector('[data-error-for=""]').textContent = `${err.code || 'ERROR'}: ${where}${err.message}`;
}

// submitting disables the form's buttons while fn runs, then restores them.
async function submitting(form, fn) {
  const buttons = [...form.querySelectorAll('button')];
  const was = buttons.map((b) => b.disabled);
  buttons.forEach((b) => { b.disabled = true; });
  try { await fn(); } finally { buttons.forEach((b, i) => { b.disabled = was[i]; }); }
}

// ---------------------------------------------------------------- chart

const SVG = 'http://www.w3.org/2000/svg';
const svgEl = (tag, attrs) => {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
};

function niceMax(v) {
  if (v <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// drawChart draws the rates of the last WINDOW_MS as a line over a filled area.
// With axes it adds grid lines and labels; without, it is a sparkline.
function drawChart(svg, rates, now, { width, height, axes }) {
  svg.replaceChildren();
  const pad = axes ? { l: 40, r: 10, t: 10, b: 22 } : { l: 1, r: 1, t: 2, b: 2 };
  const w = width - pad.l - pad.r;
  const h = height - pad.t - pad.b;
  const max = niceMax(Math.max(0, ...rates.map((s) => s.rate)));
  const x = (t) => pad.l + ((t - (now - WINDOW_MS)) / WINDOW_MS) * w;
  const y = (r) => pad.t + h - (r / max) * h;
  if (axes) {
    for (const f of [0, 0.5, 1]) {
      const gy = pad.t + h - f * h;
      svg.append(svgEl('line', { class: 'grid-line', x1: pad.l, x2: pad.l + w, y1: gy, y2: gy }));
      const label = svgEl('text', { class: 'axis-label', x: pad.l - 6, y: gy + 4, 'text-anchor': 'end' });
      const v = max * f;
      label.textContent = Number.isInteger(v) ? String(v) : v.toFixed(1);
      svg.append(label);
    }
    for (const [t, txt, anchor] of [[now - WINDOW_MS, '−60 s', 'start'], [now - WINDOW_MS / 2, '−30 s', 'middle'], [now, 'now', 'end']]) {
      const label = svgEl('text', { class: 'axis-label', x: x(t), y: height - 6, 'text-anchor': anchor });
      label.textContent = txt;
      svg.append(label);
    }
  } else {
    svg.append(svgEl('line', { class: 'grid-line', x1: pad.l, x2: pad.l + w, y1: pad.t + h, y2: pad.t + h }));
  }
  const pts = rates.filter((s) => s.t >= now - WINDOW_MS).map((s) => [x(s.t), y(s.rate)]);
  if (pts.length === 0) return;
  if (pts.length === 1) pts.unshift([Math.max(pad.l, pts[0][0] - 2), pts[0][1]]);
  const line = pts.map(([px, py], i) => `${i ? 'L' : 'M'}${px.toFixed(1)},${py.toFixed(1)}`).join('');
  const base = (pad.t + h).toFixed(1);
  svg.append(svgEl('path', { class: 'area', d: `${line}L${pts[pts.length - 1][0].toFixed(1)},${base}L${pts[0][0].toFixed(1)},${base}Z` }));
  svg.append(svgEl('path', { class: 'line', d: line }));
}

// drawTimeline draws a sale from the record: units granted and returned per second
// over the buckets' span (empty buckets are zero), and the sold-out time.
function drawTimeline(svg, tl) {
  svg.replaceChildren();
  const width = 640, height = 180;
  const pad = { l: 40, r: 10, t: 14, b: 22 };
  const w = width - pad.l - pad.r;
  const h = height - pad.t - pad.b;
  if (!tl.buckets.length) return;
  const step = tl.stepSeconds * 1000;
  const from = Date.parse(tl.buckets[0].at);
  const to = Date.parse(tl.buckets[tl.buckets.length - 1].at) + step;
  const byAt = new Map(tl.buckets.map((b) => [Date.parse(b.at), b]));
  const series = [];
  for (let t = from; t < to; t += step) {
    const b = byAt.get(t);
    series.push({ t, granted: b ? b.granted / tl.stepSeconds : 0, cancelled: b ? b.cancelled / tl.stepSeconds : 0 });
  }
  const max = niceMax(Math.max(0, ...series.map((p) => Math.max(p.granted, p.cancelled))));
  const x = (t) => pad.l + ((t - from) / Math.max(1, to - from)) * w;
  const y = (r) => pad.t + h - (r / max) * h;
  for (const f of [0, 0.5, 1]) {
    const gy = pad.t + h - f * h;
    svg.append(svgEl('line', { class: 'grid-line', x1: pad.l, x2: pad.l + w, y1: gy, y2: gy }));
    const label = svgEl('text', { class: 'axis-label', x: pad.l - 6, y: gy + 4, 'text-anchor': 'end' });
    const v = max * f;
    label.textContent = Number.isInteger(v) ? String(v) : v.toFixed(1);
    svg.append(label);
  }
  const clock = (t) => fmtTime(new Date(t).toISOString()).slice(11);
  for (const [t, anchor] of [[from, 'start'], [to, 'end']]) {
    const label = svgEl('text', { class: 'axis-label', x: x(t), y: height - 6, 'text-anchor': anchor });
    label.textContent = clock(t);
    svg.append(label);
  }
  // Each bucket is drawn at its middle, as a step of the line.
  const line = (key) => series.map((p, i) => `${i ? 'L' : 'M'}${x(p.t).toFixed(1)},${y(p[key]).toFixed(1)}L${x(p.t + step).toFixed(1)},${y(p[key]).toFixed(1)}`).join('');
  const granted = line('granted');
  const base = (pad.t + h).toFixed(1);
  svg.append(svgEl('path', { class: 'area', d: `${granted}L${x(to).toFixed(1)},${base}L${x(from).toFixed(1)},${base}Z` }));
  svg.append(svgEl('path', { class: 'line granted', d: granted }));
  if (tl.cancelled > 0) svg.append(svgEl('path', { class: 'line cancel', d: line('cancelled') }));
  if (tl.soldOutAt) {
    const sx = x(Math.min(to, Math.max(from, Date.parse(tl.soldOutAt)))).toFixed(1);
    svg.append(svgEl('line', { class: 'sold-out', x1: sx, x2: sx, y1: pad.t, y2: pad.t + h }));
    const label = svgEl('text', { class: 'sold-out-label', x: sx, y: pad.t - 3, 'text-anchor': 'middle' });
    label.textContent = 'sold out';
    svg.append(label);
  }
}

// ---------------------------------------------------------------- rows

// rowFor returns the row of p, making its table row on first sight. A row keeps
// its readings across list refreshes, so the chart survives them.
function rowFor(p) {
  const key = keyOf(p);
  let row = state.rows.get(key);
  if (row) return row;
  const tr = el('tr', { 'data-key': key });
  const open = el('button', { type: 'button', class: 'link', text: `${p.promoId} / ${p.type}`, onclick: () => select(key) });
  const title = el('span', { class: 'sub' });
  const channels = el('span', { class: 'sub channels', 'data-cell': 'channels' });
  const badge = el('span', { class: 'badge', 'data-cell': 'state' });
  const remaining = el('span', { 'data-cell': 'remaining' });
  const bar = el('span', { class: 'bar', 'aria-hidden': 'true' }, el('span'));
  const granted = el('span', { 'data-cell': 'granted' });
  const spark = svgEl('svg', { class: 'chart spark', viewBox: '0 0 120 28', 'aria-hidden': 'true' });
  const rate = el('span', { 'data-cell': 'rate' });
  const manage = el('button', { type: 'button', class: 'ghost', text: 'Manage', onclick: () => select(key) });
  manage.setAttribute('aria-label', `Manage ${p.promoId} / ${p.type}`);
  tr.append(
    el('td', {}, open, title, channels),
    el('td', {}, badge),
    el('td', { class: 'num' }, remaining, bar),
    el('td', { class: 'num' }, granted),
    el('td', {}, el('span', { class: 'rate' }, spark, rate, el('span', { class: 'muted', text: '/s' }))),
    el('td', { class: 'num', 'data-cell': 'shard' }),
    el('td', {}, manage),
  );
  row = { key, p, live: false, readings: [], rates: [], error: '', tr, cells: { title, channels, badge, remaining, bar, granted, spark, rate } };
  state.rows.set(key, row);
  return row;
}

// record takes a live reading: the rate is the units granted between successive
// readings per second (granted = total − remaining, so a change of total is no
// grab); returns put units back and count as 0, not as negative grabs.
function record(row, p, t) {
  row.p = p;
  row.live = true;
  row.error = '';
  const prev = row.readings[row.readings.length - 1];
  row.readings.push({ t, granted: p.granted });
  if (prev && t > prev.t) {
    row.rates.push({ t, rate: Math.max(0, p.granted - prev.granted) / ((t - prev.t) / 1000) });
  }
  const from = t - WINDOW_MS - 2000;
  while (row.readings.length > 2 && row.readings[0].t < from) row.readings.shift();
  while (row.rates.length && row.rates[0].t < from) row.rates.shift();
}

function currentRate(row) {
  const last = row.rates[row.rates.length - 1];
  return last && performance.now() - last.t < 3 * POLL_MS ? last.rate : row.rates.length ? 0 : null;
}

function paintRow(row) {
  const { p, cells } = row;
  cells.title.textContent = p.title || '';
  cells.title.title = p.title || '';
  // Only a promotion sold on some channels says so in the list.
  cells.channels.textContent = p.channels ? `Sold on ${channelsText(p.channels)}` : '';
  cells.badge.textContent = p.state;
  cells.badge.className = `badge ${p.state}`;
  cells.remaining.textContent = fmtInt(p.remaining);
  cells.remaining.classList.toggle('stale', !row.live || !!row.error);
  cells.remaining.title = row.error ? `live counters unavailable: ${row.error}`
    : row.live ? 'live, from the shard' : 'from the record; live reading pending';
  cells.bar.firstChild.style.width = `${p.total > 0 ? Math.max(0, Math.min(100, (100 * p.remaining) / p.total)) : 0}%`;
  cells.granted.textContent = fmtInt(p.granted);
  cells.rate.textContent = fmtRate(currentRate(row));
  drawChart(cells.spark, row.rates, performance.now(), { width: 120, height: 28, axes: false });
  row.tr.querySelector('[data-cell="shard"]').textContent = String(p.shard);
  row.tr.classList.toggle('selected', row.key === state.selected);
  row.tr.classList.toggle('gone', p.state === 'DELETED');
  if (row.key === state.selected) paintDetail(row);
}

// ---------------------------------------------------------------- list

async function loadList(cursor = state.cursor) {
  const q = new URLSearchParams({ limit: String(PAGE_SIZE) });
  const filter = $('#state-filter').value;
  if (filter) q.set('state', filter);
  if (cursor) q.set('cursor', cursor);
  let page;
  try {
    page = await api('GET', `/v1/promotions?${q}`);
  } catch (e) {
    if (e.code === 'SIGNED_OUT') return;
    // A role that reads no promotion (on-call's) sees none.
    if (e.status === 403) { showPromotions(false); return; }
    $('#list-error').textContent = `Could not list promotions: ${e.message}`;
    return;
  }
  showPromotions(true);
  $('#list-error').textContent = '';
  state.cursor = cursor;
  state.nextCursor = page.nextCursor || '';
  state.order = [];
  const tbody = $('#rows');
  const trs = [];
  for (const p of page.items) {
    const row = rowFor(p);
    // The list's counters are the record's; keep the live ones once there are any.
    if (!row.live) row.p = p;
    else row.p = { ...p, remaining: row.p.remaining, granted: row.p.granted, state: row.p.state, bucketRemaining: row.p.bucketRemaining, envelope: row.p.envelope };
    state.order.push(row.key);
    paintRow(row);
    trs.push(row.tr);
  }
  tbody.replaceChildren(...trs);
  $('#empty').hidden = page.items.length > 0;
  $('#next-page').hidden = !state.nextCursor;
  $('#first-page').hidden = !state.cursor;
}

// ---------------------------------------------------------------- live polling

async function pollLive() {
  const keys = state.order.filter((k) => state.rows.get(k).p.state !== 'DELETED');
  if (state.selected && !keys.includes(state.selected)) keys.push(state.selected);
  await Promise.all(keys.map(async (key) => {
    const row = state.rows.get(key);
    try {
      const p = await api('GET', promoPath(row.p));
      record(row, p, performance.now());
    } catch (e) {
      if (e.code === 'SIGNED_OUT') return;
      if (e.status === 404) row.p = { ...row.p, state: 'DELETED' };
      else row.error = e.message;
    }
    paintRow(row);
  }));
}

function every(ms, fn) {
  let stopped = false;
  let timer = 0;
  const tick = async () => {
    const started = performance.now();
    try { await fn(); } catch (e) { console.error(e); }
    if (!stopped) timer = setTimeout(tick, Math.max(0, ms - (performance.now() - started)));
  };
  timer = setTimeout(tick, 0);
  state.timers.push(() => { stopped = true; clearTimeout(timer); });
}

// ---------------------------------------------------------------- detail

function select(key) {
  state.selected = key;
  const row = state.rows.get(key);
  // The address names the promotion, so a reload opens it again.
  history.replaceState(null, '', `#promotion=${encodeURIComponent(row.p.promoId)}/${row.p.type}`);
  $('#detail').hidden = false;
  for (const r of state.rows.values()) r.tr.classList.toggle('selected', r.key === key);
  fillPatchForm(row.p);
  clearErrors($('#patch-form'));
  paintDetail(row);
  loadHistory(row.p);
  $('#detail-pending').hidden = true;
  loadPendingFor(row.p);
  $('#timeline-summary').textContent = 'Reading the record…';
  $('#timeline-error').textContent = '';
  $('#timeline-chart').replaceChildren();
  loadTimeline(row.p);
  $('#detail-title').focus({ preventScroll: true });
  $('#detail').scrollIntoView({ block: 'nearest' });
}

function closeDetail() {
  state.selected = '';
  history.replaceState(null, '', location.pathname);
  $('#detail').hidden = true;
  for (const r of state.rows.values()) r.tr.classList.remove('selected');
}

function paintDetail(row) {
  const { p } = row;
  $('#detail-title').textContent = `${p.promoId} / ${p.type}`;
  $('#detail-subtitle').textContent = p.title || '';
  $('#detail-remaining').textContent = fmtInt(p.remaining);
  $('#detail-of').textContent = `of ${fmtInt(p.total)}`;
  $('#detail-granted').textContent = fmtInt(p.granted);
  $('#detail-rate').textContent = fmtRate(currentRate(row));
  $('#detail-state').textContent = p.state;
  $('#detail-state').className = `value st-${p.state}`;
  $('#detail-error').textContent = row.error ? `Live counters unavailable: ${row.error}` : '';
  drawChart($('#detail-chart'), row.rates, performance.now(), { width: 640, height: 180, axes: true });
  const rl = p.rateLimit ? `${fmtInt(p.rateLimit.limit)} per ${p.rateLimit.windowSeconds} s` : 'none';
  const facts = [
    ['Redis key', p.key], ['Shard', String(p.shard)],
    ['Starts', fmtTime(p.startAt)], ['Ends', fmtTime(p.endAt)],
    ['Per-buyer limit', p.perPinLimit ? fmtInt(p.perPinLimit) : 'unlimited'],
    ['Per-IP limit', p.perIpLimit ? fmtInt(p.perIpLimit) : 'unlimited'],
    ['Most per grab', fmtInt(p.maxPerGrab)], ['Rate limit', rl],
    ['Channels', channelsText(p.channels)],
    ['Created', fmtTime(p.createdAt)], ['Updated', fmtTime(p.updatedAt)],
  ];
  // A promotion in buckets keeps its stock on several shards: one line per bucket,
  // its shard and, once read live, its stock left.
  if (p.buckets > 1) {
    facts.splice(2, 0, ['Buckets', String(p.buckets)], ...p.bucketShards.map((shard, b) => [`Bucket ${b}`,
      p.bucketRemaining ? `shard ${shard}, ${fmtInt(p.bucketRemaining[b])} left` : `shard ${shard}`]));
  }
  // An envelope pool: its budget, its least envelope and the budget left (live
  // from its shard once read, else the record's).
  if (p.envelope) {
    facts.splice(2, 0, ['Pool budget', fmtInt(p.envelope.amount)], ['Least envelope', fmtInt(p.envelope.minAmount)],
      ['Budget left', fmtInt(p.envelope.remainingAmount)]);
  }
  $('#detail-facts').replaceChildren(...facts.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', { text: v })]));
  // A stopped promotion cannot be changed (the API answers 409 STOPPED): say so
  // rather than offer a form that can only be refused.
  const locked = p.state === 'STOPPED' || p.state === 'DELETED';
  $('#patch-fields').disabled = locked;
  $('#patch-save').disabled = locked;
  $('#patch-locked').hidden = !locked;
  $('#stop-open').disabled = locked;
  $('#delete-open').disabled = p.state === 'DELETED';
}

// channelsText shows a promotion's channels; absent or none is every channel.
const channelsText = (cs) => (cs && cs.length ? cs.join(', ') : 'every channel');

// showValue shows a field's value in a history line or a proposal's change.
function showValue(field, v) {
  if (field === 'channels') return channelsText(v);
  if (v === undefined || v === null) return '—';
  if (typeof v === 'object') return `${v.limit} per ${v.windowSeconds} s`;
  if (field === 'startAt' || field === 'endAt') return fmtTime(v);
  return String(v);
}

// The audit trail, newest first: who changed what, from what to what.
const historyFields = ['state', 'total', 'perPinLimit', 'perIpLimit', 'maxPerGrab', 'rateLimit', 'startAt', 'endAt', 'title', 'channels'];

function historyLine(e) {
  const who = e.actor.name ? `${e.actor.name} (${e.actor.role})` : 'unknown';
  const head = `${fmtTime(e.at)} · ${e.action} by ${who}`;
  // A step of an approval (PROPOSED, APPROVED, REJECTED, FAILED) changed no
  // promotion; it names its proposal.
  const step = e.proposal || (e.after && e.after.proposal !== undefined && e.after.kind ? e.after : null);
  if (step) {
    const what = e.action === 'PROPOSED' ? changeLines({ kind: step.kind, change: step.change }) : [];
    return `${head}: proposal #${step.proposal} (${step.kind})${what.length ? ' ' + what.join(', ') : ''}${step.reason ? ` — ${step.reason}` : ''}`;
  }
  if (!e.after) return head;
  const changes = e.before
    ? historyFields.filter((f) => JSON.stringify(e.before[f]) !== JSON.stringify(e.after[f]))
      .map((f) => `${f} ${showValue(f, e.before[f])} → ${showValue(f, e.after[f])}`)
    : [`total ${e.after.total}`, ...(e.after.envelope ? [`pool budget ${e.after.envelope.amount}, least envelope ${e.after.envelope.minAmount}`] : [])];
  return `${head}${changes.length ? ': ' + changes.join(', ') : ''}`;
}

async function loadHistory(p) {
  const list = $('#detail-history');
  try {
    const h = await api('GET', `${promoPath(p)}/history`);
    if (state.selected !== keyOf(p)) return; // another promotion was chosen meanwhile
    list.replaceChildren(...h.entries.map((e) => el('li', { text: historyLine(e) })));
  } catch (e) {
    if (e.code !== 'SIGNED_OUT') list.replaceChildren(el('li', { class: 'error', text: `History unavailable: ${e.message}` }));
  }
}

// loadTimeline reads the promotion's sale from the record (GET .../timeline).
async function loadTimeline(p) {
  let tl;
  try {
    tl = await api('GET', `${promoPath(p)}/timeline`);
  } catch (e) {
    if (e.code !== 'SIGNED_OUT' && state.selected === keyOf(p)) $('#timeline-error').textContent = `The record's timeline is unavailable: ${e.message}`;
    return;
  }
  if (state.selected !== keyOf(p)) return;
  $('#timeline-error').textContent = '';
  drawTimeline($('#timeline-chart'), tl);
  if (!tl.buckets.length) {
    $('#timeline-summary').textContent = 'Nothing granted yet, by the record.';
    return;
  }
  const per = tl.stepSeconds === 1 ? 'per second' : `per ${tl.stepSeconds} s, shown per second`;
  const soldOut = tl.soldOutAt
    ? `sold out at ${fmtTime(tl.soldOutAt)}, ${((Date.parse(tl.soldOutAt) - Date.parse(tl.buckets[0].at)) / 1000).toFixed(1)} s after the first grant`
    : 'not sold out';
  $('#timeline-summary').textContent = `${fmtInt(tl.granted)} granted, ${fmtInt(tl.cancelled)} returned of ${fmtInt(tl.total)} (${per}); ${soldOut}.`;
}

// openFromAddress opens the promotion the address names (#promotion=<id>/<type>),
// on the page shown or not.
async function openFromAddress() {
  const m = /^#promotion=([^/]+)\/(\d+)$/.exec(location.hash);
  if (!m) return;
  const key = `${decodeURIComponent(m[1])}/${m[2]}`;
  if (!state.rows.has(key)) {
    try {
      const p = await api('GET', `/v1/promotions/${m[1]}/${m[2]}`);
      rowFor(p);
    } catch (e) {
      if (e.code !== 'SIGNED_OUT') say(`Could not open ${key}: ${e.message}`, true);
      return;
    }
  }
  select(key);
}

// The patch form starts from the current values; only what differs is sent.
function patchValues(p) {
  return {
    total: String(p.total),
    perPinLimit: String(p.perPinLimit),
    perIpLimit: String(p.perIpLimit),
    'rateLimit.limit': p.rateLimit ? String(p.rateLimit.limit) : '',
    'rateLimit.windowSeconds': p.rateLimit ? String(p.rateLimit.windowSeconds) : '',
    endAt: p.endAt ? toLocalInput(new Date(p.endAt)) : '',
    channels: (p.channels || []).join(','),
  };
}

function fillPatchForm(p) {
  const form = $('#patch-form');
  const values = patchValues(p);
  for (const [name, v] of Object.entries(values)) if (name !== 'channels') form.elements.namedItem(name).value = v;
  setChannels(form, p.channels || []);
  form.dataset.base = JSON.stringify(values);
}

// The patch form's channels: the ticked names in the contract's order (APP,
// WECHAT, QQ, WEB, as the boxes stand); none ticked is every channel, which the
// "Every channel" box says and restores.
function tickedChannels(form) {
  return [...form.querySelectorAll('input[name="channel"]:checked')].map((c) => c.value);
}

function setChannels(form, names) {
  for (const c of form.querySelectorAll('input[name="channel"]')) c.checked = names.includes(c.value);
  form.elements.namedItem('every-channel').checked = names.length === 0;
}

// A tick of "Every channel" clears the others; a tick of one channel clears it;
// clearing the last channel ticks it again.
function channelTicked(ev) {
  const form = ev.currentTarget.form;
  const box = ev.target;
  if (box.name === 'every-channel') setChannels(form, []);
  else setChannels(form, tickedChannels(form));
}

async function submitPatch(ev) {
  ev.preventDefault();
  const form = ev.target;
  const row = state.rows.get(state.selected);
  if (!row) return;
  const base = JSON.parse(form.dataset.base || '{}');
  const v = (name) => form.elements.namedItem(name).value;
  const changed = (name) => v(name) !== base[name];
  const body = {};
  for (const name of ['total', 'perPinLimit', 'perIpLimit']) if (changed(name)) body[name] = number(v(name));
  if (changed('rateLimit.limit') || changed('rateLimit.windowSeconds')) {
    body.rateLimit = { limit: number(v('rateLimit.limit')), windowSeconds: number(v('rateLimit.windowSeconds')) };
  }
  // endAt as an instant: the input may write the same time otherwise (without :00).
  if (fromLocalInput(v('endAt')) !== fromLocalInput(base.endAt)) body.endAt = fromLocalInput(v('endAt'));
  // Channels only when the ticks differ from the promotion's; [] is every channel again.
  const channels = tickedChannels(form);
  if (channels.join(',') !== base.channels) body.channels = channels;
  await submitting(form, async () => {
    try {
      const { status, data: p } = await send('PATCH', promoPath(row.p), body);
      clearErrors(form);
      if (status === 202) {
        // Nothing applied yet: the form shows the promotion as it still is.
        fillPatchForm(row.p);
        loadHistory(row.p);
        proposed(p);
        return;
      }
      record(row, p, performance.now());
      fillPatchForm(p);
      paintRow(row);
      loadHistory(p);
      say(`Changed ${keyOf(p)}.`);
    } catch (e) {
      if (e.code === 'SIGNED_OUT') return;
      if (e.field && e.field.startsWith('channels[')) e.field = 'channels';
      showError(form, e, { BELOW_GRANTED: 'total', ENVELOPE_FIXED: 'total' });
    }
  });
}

// ---------------------------------------------------------------- stop, delete

function openDialog(id) {
  const d = $(id);
  const form = $('form', d);
  form.reset();
  clearErrors(form);
  d.showModal();
}

async function submitStop(ev) {
  ev.preventDefault();
  const form = ev.target;
  const row = state.rows.get(state.selected);
  if (!row) return;
  const reason = form.elements.namedItem('reason').value.trim();
  await submitting(form, async () => {
    try {
      const p = await api('POST', `${promoPath(row.p)}/stop`, reason ? { reason } : undefined);
      record(row, p, performance.now());
      paintRow(row);
      $('#stop-dialog').close();
      loadHistory(p);
      say(`Stopped ${keyOf(p)}.`);
    } catch (e) {
      if (e.code !== 'SIGNED_OUT') showError(form, e);
    }
  });
}

async function submitDelete(ev) {
  ev.preventDefault();
  const form = ev.target;
  const row = state.rows.get(state.selected);
  if (!row) return;
  await submitting(form, async () => {
    try {
      await api('DELETE', promoPath(row.p));
      $('#delete-dialog').close();
      closeDetail();
      state.rows.delete(row.key);
      say(`Deleted ${row.key}.`);
      await loadList();
    } catch (e) {
      if (e.code !== 'SIGNED_OUT') showError(form, e);
    }
  });
}

// ---------------------------------------------------------------- create

function resetCreateForm() {
  const form = $('#create-form');
  form.reset();
  clearErrors(form);
  const now = new Date();
  now.setSeconds(0, 0);
  form.elements.namedItem('startAt').value = toLocalInput(now);
  form.elements.namedItem('endAt').value = toLocalInput(new Date(now.getTime() + 2 * 3600 * 1000));
}

async function submitCreate(ev) {
  ev.preventDefault();
  const form = ev.target;
  const v = (name) => form.elements.namedItem(name).value;
  const body = {
    promoId: v('promoId').trim() || undefined,
    type: number(v('type')),
    title: v('title').trim() || undefined,
    total: number(v('total')),
    perPinLimit: number(v('perPinLimit')),
    perIpLimit: number(v('perIpLimit')),
    maxPerGrab: number(v('maxPerGrab')),
    buckets: number(v('buckets')),
    startAt: fromLocalInput(v('startAt')),
    endAt: fromLocalInput(v('endAt')),
  };
  const limit = number(v('rateLimit.limit'));
  const windowSeconds = number(v('rateLimit.windowSeconds'));
  if (limit !== undefined || windowSeconds !== undefined) body.rateLimit = { limit, windowSeconds };
  const amount = number(v('envelope.amount'));
  const minAmount = number(v('envelope.minAmount'));
  if (amount !== undefined || minAmount !== undefined) body.envelope = { amount, minAmount };
  // The channels ticked; none is every channel (the field left out).
  const channels = [...form.querySelectorAll('input[name="channel"]:checked')].map((c) => c.value);
  if (channels.length) body.channels = channels;
  await submitting(form, async () => {
    try {
      const { status, data: p } = await send('POST', '/v1/promotions', body);
      resetCreateForm();
      if (status === 202) {
        proposed(p);
        return;
      }
      say(`Created ${keyOf(p)}.`);
      state.cursor = '';
      $('#state-filter').value = '';
      await loadList('');
      const row = state.rows.get(keyOf(p));
      if (row) { record(row, p, performance.now()); paintRow(row); select(row.key); }
    } catch (e) {
      // A refusal of the pool as a whole (its budget too small for total envelopes
      // of its least amount, or with buckets) is shown by the budget.
      // A refusal of one channel (channels[i]) is shown by the channels.
      if (e.code === 'SIGNED_OUT') return;
      if (e.field === 'envelope') e.field = 'envelope.amount';
      if (e.field && e.field.startsWith('channels[')) e.field = 'channels';
      showError(form, e);
    }
  });
}

// ---------------------------------------------------------------- approval queue

// proposed tells the merchandiser a create or change waits for an approver, and
// shows the queue with it.
function proposed(pr) {
  say(`Sent for approval, proposal #${pr.id}: ${pr.kind === 'CREATE' ? 'create' : 'change'} of ${keyOf(pr)}. Nothing is applied until an approver approves it.`);
  loadProposals();
}

// loadProposals shows a page of the queue (newest first) for the filter chosen.
// The card stays hidden where there is no queue: approval off (409
// APPROVAL_OFF), a service without it (404), a role that does not read it (403).
async function loadProposals(cursor = state.queue.cursor) {
  const q = new URLSearchParams({ limit: String(PAGE_SIZE) });
  const filter = $('#proposal-filter').value;
  if (filter) q.set('status', filter);
  if (cursor) q.set('cursor', cursor);
  let page;
  try {
    page = await api('GET', `/v1/proposals?${q}`);
  } catch (e) {
    if (e.code === 'SIGNED_OUT') return;
    if ([403, 404, 409].includes(e.status)) { $('#approvals').hidden = true; return; }
    $('#proposals-error').textContent = `Could not read the approval queue: ${e.message}`;
    return;
  }
  $('#approvals').hidden = false;
  $('#proposals-error').textContent = '';
  Object.assign(state.queue, { cursor, nextCursor: page.nextCursor || '' });
  const current = await currentValues(page.items);
  $('#proposals').replaceChildren(...page.items.map((pr) => proposalItem(pr, current.get(keyOf(pr)))));
  $('#proposals-empty').hidden = page.items.length > 0;
  $('#proposals-next').hidden = !state.queue.nextCursor;
  $('#proposals-first').hidden = !cursor;
  const row = state.selected && state.rows.get(state.selected);
  if (row) loadPendingFor(row.p);
}

// currentValues reads the promotions that pending changes would change, so a
// change shows from what to what; a promotion the token may not read is left out.
async function currentValues(items) {
  const keys = [...new Set(items.filter((pr) => pr.kind === 'PATCH' && pr.status === 'PENDING').map(keyOf))];
  const out = new Map();
  await Promise.all(keys.map(async (key) => {
    const row = state.rows.get(key);
    if (row && row.live) { out.set(key, row.p); return; }
    const [promoId, type] = [key.slice(0, key.lastIndexOf('/')), key.slice(key.lastIndexOf('/') + 1)];
    try { out.set(key, await api('GET', promoPath({ promoId, type }))); } catch { /* shown without the current values */ }
  }));
  return out;
}

// loadPendingFor says, in the detail view, which proposals of p wait for an
// approver (the newest page of the queue's pending ones); nothing where there is
// no queue.
async function loadPendingFor(p) {
  const note = $('#detail-pending');
  let page;
  try {
    page = await api('GET', '/v1/proposals?status=PENDING&limit=100');
  } catch {
    if (state.selected === keyOf(p)) note.hidden = true;
    return;
  }
  if (state.selected !== keyOf(p)) return;
  const mine = page.items.filter((pr) => keyOf(pr) === keyOf(p));
  note.hidden = mine.length === 0;
  note.textContent = mine.length
    ? `Waiting for approval: ${mine.map((pr) => `#${pr.id} (${changeLines(pr, p).join(', ')})`).join('; ')}.` : '';
}

// Fields a change may name, in the order shown; channels [] is every channel.
const changeFields = ['total', 'perPinLimit', 'perIpLimit', 'rateLimit', 'endAt', 'channels'];

// changeLines says what a proposal would do: a create's spec, a change's fields
// from their current value (when known) to the proposed one.
function changeLines(pr, now) {
  const c = pr.change || {};
  if (pr.kind === 'CREATE') {
    return [
      `total ${c.total}`, `perPinLimit ${showValue('perPinLimit', c.perPinLimit || 0)}`, `perIpLimit ${showValue('perIpLimit', c.perIpLimit || 0)}`,
      `maxPerGrab ${showValue('maxPerGrab', c.maxPerGrab || 1)}`, `rateLimit ${c.rateLimit ? showValue('rateLimit', c.rateLimit) : 'none'}`,
      `from ${showValue('startAt', c.startAt)} to ${showValue('endAt', c.endAt)}`, `channels ${showValue('channels', c.channels)}`,
      ...(c.title ? [`title ${c.title}`] : []), ...(c.buckets > 1 ? [`buckets ${c.buckets}`] : []),
      ...(c.envelope ? [`pool budget ${c.envelope.amount}, least envelope ${c.envelope.minAmount}`] : []),
    ];
  }
  return changeFields.filter((f) => f in c).map((f) => {
    if (!now) return `${f} → ${showValue(f, c[f])}`;
    const from = showValue(f, now[f]);
    const to = showValue(f, c[f]);
    return from === to ? `${f} ${to} (unchanged)` : `${f} ${from} → ${to}`;
  });
}

function decisionText(pr) {
  const who = pr.decidedBy ? `${pr.decidedBy.name} (${pr.decidedBy.role})` : '';
  const at = pr.decidedAt ? ` at ${fmtTime(pr.decidedAt)}` : '';
  const why = pr.reason ? `: ${pr.reason}` : '';
  switch (pr.status) {
    case 'APPROVED': return `Approved by ${who}${at}.`;
    case 'REJECTED': return `Rejected by ${who}${at}${why}`;
    case 'FAILED': return `Failed${who ? ` on approval by ${who}` : ''}${at}${why}`;
    case 'APPLYING': return `Being applied${who ? ` on approval by ${who}` : ''}.`;
    default: return '';
  }
}

// proposalItem renders one proposal, with Approve and Reject for an approver.
function proposalItem(pr, now) {
  const proposer = pr.proposer && pr.proposer.name ? `${pr.proposer.name} (${pr.proposer.role})` : 'unknown';
  const li = el('li', { class: `proposal ${pr.status}`, 'data-proposal-id': String(pr.id) },
    el('div', { class: 'proposal-head' },
      el('strong', { text: `#${pr.id}` }),
      el('span', { class: 'badge', text: pr.kind }),
      el('span', { class: 'proposal-key', text: `${pr.promoId} / ${pr.type}` }),
      el('span', { class: `badge ${pr.status}`, 'data-cell': 'status', text: pr.status })),
    el('p', { class: 'muted', text: `Proposed by ${proposer} at ${fmtTime(pr.proposedAt)}` }),
    el('ul', { class: 'change', 'data-cell': 'change' }, ...changeLines(pr, now).map((line) => el('li', { text: line }))));
  const decided = decisionText(pr);
  if (decided) li.append(el('p', { class: 'decision', 'data-cell': 'decision', text: decided }));
  li.append(el('p', { class: 'error', 'data-cell': 'error', text: state.queue.errors.get(pr.id) || '' }));
  if (pr.status === 'PENDING' && state.queue.decides) {
    li.append(el('div', { class: 'actions' },
      el('button', { type: 'button', class: 'approve', text: 'Approve', onclick: (ev) => approveProposal(pr, ev.currentTarget) }),
      el('button', { type: 'button', class: 'danger reject', text: 'Reject…', onclick: () => openReject(pr) })));
  }
  return li;
}

async function approveProposal(pr, button) {
  button.disabled = true;
  try {
    const r = await api('POST', `/v1/proposals/${pr.id}/approve`);
    state.queue.errors.delete(pr.id);
    say(`Approved proposal #${pr.id}: ${keyOf(r.promotion)} ${pr.kind === 'CREATE' ? 'created' : 'changed'}.`);
    applied(r.promotion);
  } catch (e) {
    if (e.code === 'SIGNED_OUT') return;
    // By the proposal while it is listed, and in the status line, as a refusal
    // that decided it (PROPOSAL_STALE: FAILED) takes it out of the pending list.
    const msg = `${e.code || 'ERROR'}: ${e.message}`;
    state.queue.errors.set(pr.id, msg);
    say(`Proposal #${pr.id} not approved: ${msg}`, true);
  }
  await loadProposals();
}

// applied shows a promotion an approval changed, where it is shown.
function applied(p) {
  const row = state.rows.get(keyOf(p));
  if (row) {
    record(row, p, performance.now());
    if (row.key === state.selected) { fillPatchForm(p); loadHistory(p); }
    paintRow(row);
  }
  if (!$('#promotions').hidden) loadList();
}

function openReject(pr) {
  state.queue.rejecting = pr;
  $('#reject-what').textContent = `Proposal #${pr.id}: ${pr.kind === 'CREATE' ? 'create' : 'change'} of ${keyOf(pr)} by ${pr.proposer ? pr.proposer.name : 'unknown'}.`;
  openDialog('#reject-dialog');
}

// submitReject sends the reason as typed: the service says what a reason must be.
async function submitReject(ev) {
  ev.preventDefault();
  const form = ev.target;
  const pr = state.queue.rejecting;
  if (!pr) return;
  await submitting(form, async () => {
    try {
      await api('POST', `/v1/proposals/${pr.id}/reject`, { reason: form.elements.namedItem('reason').value });
      state.queue.errors.delete(pr.id);
      $('#reject-dialog').close();
      say(`Rejected proposal #${pr.id}.`);
      await loadProposals();
    } catch (e) {
      if (e.code !== 'SIGNED_OUT') showError(form, e);
    }
  });
}

// ---------------------------------------------------------------- switches

async function loadSwitches() {
  let v;
  try {
    v = await api('GET', '/v1/switches');
  } catch (e) {
    if (e.code === 'SIGNED_OUT') return;
    if (e.status === 403) { $('#switches').hidden = true; return; }
    $('#switches-error').textContent = `Could not read the switches: ${e.message}`;
    return;
  }
  $('#switches').hidden = false;
  $('#switches-error').textContent = '';
  const s = v.switches;
  const onOff = (on, yes, no, bad) => el('span', { class: `badge ${on === bad ? 'off' : 'on'}`, text: on ? yes : no });
  const limit = (n) => (n > 0 ? `${n}/s per instance` : 'off');
  const blocked = s.blockedPromotions.length
    ? el('span', {}, ...s.blockedPromotions.map((b, i) => el('span', {}, i ? ', ' : '', el('code', { text: b }))))
    : el('span', { class: 'muted', text: 'none' });
  const facts = [
    ['Grabs', onOff(s.grabEnabled, 'enabled', 'disabled', false)],
    ['Kafka degrade', s.kafkaDegrade ? el('span', { class: 'badge warn', text: 'on: flows go to MySQL' }) : el('span', { class: 'badge on', text: 'off' })],
    ['Rate factor while degraded', el('span', { text: String(s.degradeRateFactor) })],
    ['Grab method limit', el('span', { text: limit(s.methodLimits.grab) })],
    ['Cancel method limit', el('span', { text: limit(s.methodLimits.cancel) })],
    ['Blocked promotions', blocked],
    ['Document md5', el('code', { text: v.md5 })],
    ['Source', el('span', { text: v.source || 'none (defaults)' })],
  ];
  $('#switches-facts').replaceChildren(...facts.flatMap(([k, node]) => [el('dt', { text: k }), el('dd', {}, node)]));
  $('#switches-raw').textContent = JSON.stringify(s, null, 2);
  loadSwitchHistory();
}

// The switches' changes, newest first: who (a name, or "outside the API"), when,
// why and what.
async function loadSwitchHistory() {
  let page;
  try {
    page = await api('GET', '/v1/switches/history?limit=10');
  } catch (e) {
    if (e.code !== 'SIGNED_OUT') $('#switch-history-error').textContent = `Could not read the changes: ${e.message}`;
    return;
  }
  $('#switch-history-error').textContent = '';
  const line = (e) => {
    const who = e.via === 'DETECTED' ? 'outside the API (break-glass or a direct edit)' : `${e.actor.name} (${e.actor.role})`;
    const what = e.changes.map((c) => (c.added || c.removed
      ? `${c.switch} ${[...(c.added || []).map((a) => '+' + a), ...(c.removed || []).map((r) => '−' + r)].join(' ')}`
      : `${c.switch} ${c.before || '—'} → ${c.after || '—'}`)).join(', ');
    const outcome = e.outcome === 'APPLIED' ? '' : ` [${e.outcome}]`;
    return `${fmtTime(e.at)} · by ${who}${outcome}${e.reason ? ` — ${e.reason}` : ''}${what ? ': ' + what : ''}`;
  };
  $('#switch-history').replaceChildren(...(page.entries.length
    ? page.entries.map((e) => el('li', { text: line(e) }))
    : [el('li', { class: 'muted', text: 'No change recorded yet.' })]));
}

// ---------------------------------------------------------------- session

// showPromotions shows or hides what needs reading promotions; the create form
// and the change form also need writing them.
function showPromotions(on) {
  $('#promotions').hidden = !on;
  $('#create').hidden = !on || !can('write');
  if (!on) $('#detail').hidden = true;
}

// showRole shows who is signed in and only the controls the role may use.
function showRole() {
  const w = state.who;
  $('#whoami').textContent = `${w.name || 'unnamed token'} (${w.role})`;
  showPromotions(can('promotions'));
  $('#patch-title').hidden = !can('write');
  $('#patch-form').hidden = !can('write');
  $('#switches').hidden = !can('switches');
  state.queue.decides = can('decide');
}

// whoAmI asks the service whose token this is; a page reloaded with a token
// kept in the tab asks again, as the token's role may have changed.
async function whoAmI() {
  try {
    return await api('GET', '/v1/whoami');
  } catch (e) {
    if (e.code !== 'SIGNED_OUT') signOut(`Could not tell whose token this is: ${e.message}. Sign in again.`);
    return null;
  }
}

async function startSession() {
  const gen = state.generation;
  if (!state.who) {
    const who = await whoAmI();
    if (!who || gen !== state.generation) return;
    state.who = who;
  }
  $('#sign-in-panel').hidden = true;
  $('#app').hidden = false;
  $('#session').hidden = false;
  showRole();
  resetCreateForm();
  if (can('promotions')) {
    every(POLL_MS, pollLive);
    every(LIST_MS, () => loadList());
    every(TIMELINE_MS, async () => {
      const row = state.selected && state.rows.get(state.selected);
      if (row) await loadTimeline(row.p);
    });
    openFromAddress();
  }
  if (can('switches')) every(SWITCHES_MS, loadSwitches);
  if (can('queue')) every(QUEUE_MS, () => loadProposals());
  every(1000, async () => { $('#clock').textContent = fmtTime(new Date().toISOString()); });
}

function signOut(msg) {
  state.generation++;
  state.timers.forEach((stop) => stop());
  Object.assign(state, { token: '', rows: new Map(), order: [], cursor: '', nextCursor: '', selected: '', timers: [], queue: newQueue(), who: null });
  sessionStorage.removeItem(TOKEN_KEY);
  for (const d of document.querySelectorAll('dialog[open]')) d.close();
  $('#rows').replaceChildren();
  $('#proposals').replaceChildren();
  $('#approvals').hidden = true;
  showPromotions(true);
  $('#switches').hidden = false;
  $('#whoami').textContent = '';
  $('#detail').hidden = true;
  $('#app').hidden = true;
  $('#session').hidden = true;
  $('#sign-in-panel').hidden = false;
  $('#token').value = '';
  clearErrors($('#sign-in'));
  say(msg || 'Signed out.', !!msg);
  $('#token').focus();
}

async function submitSignIn(ev) {
  ev.preventDefault();
  const form = ev.target;
  const token = $('#token').value.trim();
  clearErrors(form);
  if (!token) {
    showError(form, { field: 'token', message: 'enter a bearer token' });
    return;
  }
  // The service says whose token it is, and so what the page offers: 401 for a
  // token it does not know.
  const res = await fetch('/v1/whoami', { headers: { Authorization: `Bearer ${token}` } }).catch(() => null);
  let body = null;
  if (res) { try { body = await res.json(); } catch { body = null; } }
  if (!res || !res.ok || !body || !body.role) {
    const message = body && body.code ? `${body.code}: ${body.message}` : res ? `HTTP ${res.status}` : 'promo-admin did not answer';
    showError(form, { field: 'token', message });
    return;
  }
  state.token = token;
  state.who = { name: body.name, role: body.role };
  sessionStorage.setItem(TOKEN_KEY, token);
  say(`Signed in as ${body.name || 'an unnamed token'} (${body.role}).`);
  startSession();
}

// ---------------------------------------------------------------- wiring

document.addEventListener('DOMContentLoaded', () => {
  $('#sign-in').addEventListener('submit', submitSignIn);
  $('#sign-out').addEventListener('click', () => signOut());
  $('#create-form').addEventListener('submit', submitCreate);
  $('#patch-form').addEventListener('submit', submitPatch);
  $('#patch-form fieldset[name="channels"]').addEventListener('change', channelTicked);
  $('#stop-form').addEventListener('submit', submitStop);
  $('#delete-form').addEventListener('submit', submitDelete);
  $('#reject-form').addEventListener('submit', submitReject);
  $('#proposal-filter').addEventListener('change', () => loadProposals(''));
  $('#proposals-refresh').addEventListener('click', () => loadProposals());
  $('#proposals-next').addEventListener('click', () => loadProposals(state.queue.nextCursor));
  $('#proposals-first').addEventListener('click', () => loadProposals(''));
  $('#stop-open').addEventListener('click', () => openDialog('#stop-dialog'));
  $('#delete-open').addEventListener('click', () => openDialog('#delete-dialog'));
  for (const b of document.querySelectorAll('dialog [data-close]')) b.addEventListener('click', () => b.closest('dialog').close());
  $('#close-detail').addEventListener('click', closeDetail);
  $('#refresh').addEventListener('click', () => loadList());
  $('#state-filter').addEventListener('change', () => loadList(''));
  $('#next-page').addEventListener('click', () => loadList(state.nextCursor));
  $('#first-page').addEventListener('click', () => loadList(''));
  if (state.token) startSession();
  else $('#token').focus();
});
