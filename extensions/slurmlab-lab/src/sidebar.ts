/**
 * The "Slurm GPUs" sidebar: which cluster it shows (and a picker of the clusters the server sees), the
 * cluster's GPU map (nodes x numbered GPUs, coloured by job, shards as fractions) with its legend, and
 * the user's jobs with a cancel action; a pending job says why in plain words, how long it has waited
 * and when Slurm expects it to start.
 *
 * Plain DOM in a Lumino widget keeps the extension free of a React dependency; the panel is
 * rebuilt from each answer, which is small (one row per node and per job).
 */
import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import { IPoll, Poll } from '@lumino/polling';
import { Widget } from '@lumino/widgets';

import {
  ApiError,
  cancelJob,
  getClusters,
  getNodes,
  getQueue,
  getStatus,
  ICluster,
  IJob,
  IQueue,
  ISession,
  IStatus,
  getSession,
  setCluster
} from './api';
import {
  fillPicker,
  resolveChoice,
  storeChoice,
  storedChoice
} from './clusterpick';
import { el } from './dom';
import { IMapContext, renderLegend, renderMap } from './gpumap';
import { JobTable } from './jobtable';
import { eventMessage, IJobEvent, JobWatcher } from './notify';
import { JobPalette } from './palette';
import { KernelsSection } from './kernelsview';
import { RecentJobsSection } from './recentjobs';

export const DEFAULT_REFRESH_S = 5;
/** The longest wait between two requests while the server does not answer. */
export const MAX_BACKOFF_S = 30;

/**
 * Every `seconds`; after a failed request Lumino's backoff waits up to three times longer each time,
 * at most MAX_BACKOFF_S (or the interval, when that is longer).
 */
export function pollFrequency(seconds: number): IPoll.Frequency {
  const interval = Math.max(1, seconds) * 1000;
  return {
    interval,
    backoff: true,
    max: Math.max(interval, MAX_BACKOFF_S * 1000)
  };
}

/** Seconds from now until an ISO time (null when there is none). */
export function secondsUntil(
  iso: string | null,
  now: number = Date.now()
): number | null {
  if (!iso) {
    return null;
  }
  const at = Date.parse(iso);
  return Number.isNaN(at) ? null : Math.max(0, (at - now) / 1000);
}

/** Seconds since an ISO time (null when there is none). */
export function secondsSince(
  iso: string | null,
  now: number = Date.now()
): number | null {
  if (!iso) {
    return null;
  }
  const at = Date.parse(iso);
  return Number.isNaN(at) ? null : Math.max(0, (now - at) / 1000);
}

/**
 * `[D-]HH:MM:SS`, as slurmlab.core.slurm.timefmt.format_duration writes it. The one duration
 * formatter of the front end: the server sends `ends_at`, not the time left, so that its answer
 * stays the same from one second to the next, and the countdown is drawn here.
 */
export function formatSeconds(seconds: number | null): string {
  if (seconds === null || seconds === undefined) {
    return '—';
  }
  if (seconds < 0) {
    return 'unlimited';
  }
  const d = Math.floor(seconds / 86400);
  const h = Math.floor((seconds % 86400) / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = Math.floor(seconds % 60);
  const hms = `${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:${String(s).padStart(2, '0')}`;
  return d > 0 ? `${d}-${hms}` : hms;
}

/** "node1: 4,6,7 h100 · node2: 3 shard×4": the GPUs of a job, grouped per node. */
export function gpuSummary(job: IJob): string {
  if (!job.gpus.length) {
    return job.gres || '—';
  }
  const perNode = new Map<string, string[]>();
  for (const g of job.gpus) {
    const parts = perNode.get(g.node) || [];
    const where = g.index === null ? '?' : String(g.index);
    parts.push(
      g.kind === 'gpu' ? where : `${where} ${g.kind}×${g.count ?? '?'}`
    );
    perNode.set(g.node, parts);
  }
  const types = [
    ...new Set(
      job.gpus.filter(g => g.kind === 'gpu' && g.type).map(g => g.type)
    )
  ];
  const nodes = [...perNode.entries()].map(
    ([node, parts]) => `${node}: ${parts.join(',')}`
  );
  return nodes.join(' · ') + (types.length ? ` (${types.join(', ')})` : '');
}

/** "14:05" today, else "Dec 2 14:05": when Slurm expects a pending job to start. */
export function clockTime(iso: string, now: Date = new Date()): string {
  const at = new Date(iso);
  const hm = `${String(at.getHours()).padStart(2, '0')}:${String(at.getMinutes()).padStart(2, '0')}`;
  if (at.toDateString() === now.toDateString()) {
    return hm;
  }
  return `${at.toLocaleString('en', { month: 'short' })} ${at.getDate()} ${hm}`;
}

/** The pending job's lines: why (in words, Slurm's word in the title), what would help, for how long,
 * and the expected start once Slurm has one. */
function pendingBlock(job: IJob): HTMLElement {
  const box = el('div', 'slurmlab-Pending');
  const words = el(
    'div',
    'slurmlab-Reason',
    job.reason_words || 'submitted: Slurm has not looked at it yet'
  );
  words.title = job.reason_words
    ? `Slurm's reason: ${job.reason}`
    : "Slurm's reason: none yet";
  box.appendChild(words);
  if (job.reason_hint) {
    box.appendChild(el('div', 'slurmlab-ReasonHint', `→ ${job.reason_hint}`));
  }
  const waited = secondsSince(job.submit_time);
  const times = el('div', 'slurmlab-PendingTimes');
  times.appendChild(
    el(
      'span',
      'slurmlab-PendingFor',
      waited === null ? 'pending' : `pending for ${formatSeconds(waited)}`
    )
  );
  const start = job.expected_start;
  const expected = start
    ? `expected start ${clockTime(start)} (in ${formatSeconds(secondsUntil(start))})`
    : 'no expected start from Slurm yet';
  const startNode = el('span', 'slurmlab-ExpectedStart', expected);
  startNode.dataset.known = String(Boolean(start));
  times.appendChild(document.createTextNode(' · '));
  times.appendChild(startNode);
  box.appendChild(times);
  return box;
}

/** [days, hours, minutes, seconds] of a duration, read from formatSeconds (the one duration formatter). */
function durationFields(seconds: number): number[] {
  const text = formatSeconds(Math.max(0, seconds));
  const [days, hms] = text.includes('-') ? text.split('-') : ['0', text];
  return [Number(days), ...hms.split(':').map(Number)];
}

/** "1 h 12 min" (the session line's time left, as `%slurm` words it). */
export function hoursMinutes(seconds: number): string {
  const [days, h, minutes] = durationFields(seconds);
  const hours = days * 24 + h;
  return hours ? `${hours} h ${minutes} min` : `${minutes} min`;
}

/** "1 hour 2 minutes", as slurmlab.core.slurm.timefmt.duration_in_words writes it. */
export function durationInWords(seconds: number): string {
  const words = ['day', 'hour', 'minute', 'second'];
  return durationFields(seconds)
    .map((n, i) => (n ? `${n} ${words[i]}${n !== 1 ? 's' : ''}` : ''))
    .filter(Boolean)
    .join(' ');
}

/** The walltime warning of a running job, with the thresholds and words of a notebook's allocation panel
 * (slurmlab.core.diagnosis.time_warnings): five minutes left, and a tenth of the limit left. */
export function timeWarning(
  left: number | null,
  limit: number | null
): { level: 'tenth' | 'five-minutes'; message: string } | null {
  if (left === null || limit === null || limit <= 0) {
    return null;
  }
  const words = durationInWords(left) || 'under a second';
  if (left <= 300) {
    return {
      level: 'five-minutes',
      message: `Time almost up: ${words} left — Slurm ends the allocation at its time limit; save your work now`
    };
  }
  if (left <= 0.1 * limit) {
    return {
      level: 'tenth',
      message:
        `Time running out: ${words} left (under 10 % of the ` +
        `${durationInWords(limit)} limit) — save your work soon`
    };
  }
  return null;
}

/** "2 × h100", per GPU type, of the whole GPUs a job holds ("no GPU" when it holds none). */
export function gpuCounts(job: IJob): string {
  const counts = new Map<string, number>();
  for (const g of job.gpus) {
    if (g.kind === 'gpu') {
      const kind = g.type || 'GPU';
      counts.set(kind, (counts.get(kind) || 0) + 1);
    }
  }
  const parts = [...counts.entries()].map(([kind, n]) => `${n} × ${kind}`);
  return parts.join(', ') || 'no GPU';
}

/**
 * The "this session" row's words: `this session: job 14 on node1, 2 × h100, 1 h 12 min left`, and the walltime
 * warning due (the session, and this page's kernels with it, end when the job does).
 */
export function sessionText(
  job: IJob,
  now: number = Date.now()
): { line: string; warning: string | null; level: string | null } {
  const left = secondsUntil(job.ends_at, now);
  const time =
    left !== null
      ? `${hoursMinutes(left)} left`
      : job.time_limit_s === null
        ? 'no time limit'
        : 'no time limit known';
  const line = `this session: job ${job.display_id} on ${job.nodes || 'its nodes'}, ${gpuCounts(job)}, ${time}`;
  const warning =
    job.state === 'RUNNING' ? timeWarning(left, job.time_limit_s) : null;
  return {
    line,
    warning: warning ? `${warning.message}; this session ends with it` : null,
    level: warning ? warning.level : null
  };
}

/**
 * The session row into `node`: the job this Jupyter server runs in (`live`: its row of the latest listing, newer
 * than the server's one read of it), never with a cancel button; hidden when the server runs in no job.
 */
export function renderSession(
  node: HTMLElement,
  session: ISession | null,
  live: IJob | null = null,
  now: number = Date.now()
): void {
  node.replaceChildren();
  const job = live || (session ? session.job : null);
  if (!session || !session.job_id) {
    node.hidden = true;
    delete node.dataset.jobId;
    return;
  }
  node.hidden = false;
  node.dataset.jobId = session.job_id;
  if (!job) {
    node.appendChild(
      el(
        'div',
        'slurmlab-SessionLine',
        `this session: job ${session.job_id}` +
          (session.problem ? ` (${session.problem})` : '')
      )
    );
  } else {
    const said = sessionText(job, now);
    node.dataset.level = said.level || '';
    node.appendChild(el('div', 'slurmlab-SessionLine', said.line));
    if (said.warning) {
      node.appendChild(el('div', 'slurmlab-SessionWarning', said.warning));
    }
  }
  node.appendChild(el('div', 'slurmlab-SessionWords', session.words));
}

/** Whether data this old missed the last two polls of the listing it comes from. */
export function isStale(
  status: IStatus,
  dataAge: number,
  whole: boolean
): boolean {
  const every = whole
    ? (status.cluster_poll_interval_s ?? status.poll_interval_s)
    : status.poll_interval_s;
  return dataAge > 2 * every;
}

/**
 * The status line: the controller, Slurm's version, whose jobs, how often the server asks Slurm (the site's
 * settings: the user's own jobs, and the whole cluster for the map and "all jobs"), and the data's age when it
 * is older than two of the intervals it comes from (Slurm did not answer the last polls).
 */
export function statusText(
  status: IStatus,
  dataAge = 0,
  whole = false
): string {
  const state = status.reachable ? 'controller up' : 'controller DOWN';
  const version = status.version ? `Slurm ${status.version}` : 'Slurm ?';
  const stale = isStale(status, dataAge, whole)
    ? ` · data ${formatSeconds(dataAge)} old`
    : '';
  const cadence =
    status.cluster_poll_interval_s &&
    status.cluster_poll_interval_s !== status.poll_interval_s
      ? `my jobs every ${status.poll_interval_s}s, cluster every ${status.cluster_poll_interval_s}s`
      : `every ${status.poll_interval_s}s`;
  // a rate-limiting or slow controller stretches the polls: the server says so, with the interval it keeps now
  const slow = status.slow ? ` · ${status.slow}` : '';
  return `${state} · ${version} · user ${status.user} · ${cadence}${slow}${stale}`;
}

export class SlurmSidebar extends Widget {
  private _scope: 'mine' | 'all' = 'mine';
  /** The round under way, and whether a click or a pick asked for one more while it ran. */
  private _running: Promise<void> | null = null;
  private _again = false;
  private readonly _poll: Poll;
  private _choice: string | null = storedChoice();
  private _palette = new JobPalette();
  /** Ids of the clusters the server listed, and those that appeared since the sidebar first asked. */
  private _seenClusters: Set<string> | null = null;
  private _newClusters = new Set<string>();
  private readonly _clusterName: HTMLElement;
  private readonly _picker: HTMLSelectElement;
  private readonly _clusterNote: HTMLElement;
  private readonly _statusLine: HTMLElement;
  private readonly _map: HTMLElement;
  private readonly _legend: HTMLElement;
  private readonly _jobs: HTMLElement;
  private readonly _jobTable = new JobTable(
    () => this._jobHead(),
    job => this._jobRows(job)
  );
  private readonly _error: HTMLElement;
  /** The job this Jupyter server runs in (asked once: the server reads it once), and its row. */
  private _session: ISession | null = null;
  private _sessionAsked = false;
  private _ownShown = false;
  private readonly _sessionRow: HTMLElement;
  private readonly _recent = new RecentJobsSection();
  /** "kernels on GPU nodes" (kernelsview.ts): the server's provisioned kernels and the specs that start one. */
  readonly kernels = new KernelsSection();
  private readonly _watcher = new JobWatcher();
  /** My jobs and their states at the last round, and how many more rounds ask for recent jobs at once. */
  private _myQueueKey: string | null = null;
  private _recentRounds = 0;

  constructor() {
    super();
    this._poll = new Poll({
      auto: false,
      factory: () => this._round(),
      frequency: pollFrequency(DEFAULT_REFRESH_S),
      name: 'slurmlab-lab:sidebar',
      // The panel collapsed: nothing to draw. The tab hidden: Lumino's own standby (after one tick).
      standby: () => (this.isVisible ? 'when-hidden' : true)
    });
    this.id = 'slurmlab-sidebar';
    this.addClass('slurmlab-Sidebar');
    this.title.caption = 'Slurm GPUs';

    const header = el('div', 'slurmlab-Header');
    header.appendChild(el('h2', 'slurmlab-Title', 'Slurm GPUs'));
    const refresh = el('button', 'slurmlab-Refresh jp-mod-styled', 'Refresh');
    refresh.title = 'Ask the server now';
    refresh.onclick = () => void this.refresh();
    header.appendChild(refresh);
    this.node.appendChild(header);

    const clusterRow = el('div', 'slurmlab-ClusterRow');
    this._clusterName = el('div', 'slurmlab-ClusterName', 'cluster: …');
    clusterRow.appendChild(this._clusterName);
    this._picker = el('select', 'slurmlab-ClusterPicker');
    this._picker.onchange = () => this._pick(this._picker.value);
    clusterRow.appendChild(this._picker);
    this.node.appendChild(clusterRow);
    this._clusterNote = el('div', 'slurmlab-ClusterNote');
    this._clusterNote.hidden = true;
    this.node.appendChild(this._clusterNote);

    this._statusLine = el('div', 'slurmlab-Status', 'connecting…');
    this._error = el('div', 'slurmlab-Error');
    this._error.hidden = true;
    this.node.appendChild(this._statusLine);
    this.node.appendChild(this._error);
    this._sessionRow = el('div', 'slurmlab-Session');
    this._sessionRow.hidden = true;
    this.node.appendChild(this._sessionRow);
    this.node.appendChild(this.kernels.node);

    this.node.appendChild(el('h3', 'slurmlab-Section', 'GPU map'));
    this._map = el('div', 'slurmlab-Map');
    this.node.appendChild(this._map);
    this._legend = el('div', 'slurmlab-Legend');
    this.node.appendChild(this._legend);

    const jobsHeader = el('div', 'slurmlab-JobsHeader');
    jobsHeader.appendChild(el('h3', 'slurmlab-Section', 'Jobs'));
    const scope = el('select', 'slurmlab-Scope');
    for (const value of ['mine', 'all']) {
      const option = el(
        'option',
        undefined,
        value === 'mine' ? 'my jobs' : 'all jobs'
      );
      option.value = value;
      scope.appendChild(option);
    }
    scope.onchange = () => {
      this._scope = scope.value === 'all' ? 'all' : 'mine';
      void this.refresh();
    };
    jobsHeader.appendChild(scope);
    this.node.appendChild(jobsHeader);
    this._jobs = el('div', 'slurmlab-Jobs');
    this.node.appendChild(this._jobs);
    this.node.appendChild(this._recent.node); // recentjobs.ts: its own slow cadence
  }

  /** Seconds between refreshes (from the settings). */
  set refreshInterval(seconds: number) {
    const before = this._poll.frequency.interval;
    this._poll.frequency = pollFrequency(seconds);
    // a new interval counts from now, not from the end of the old one (an hour, say)
    if (this._poll.frequency.interval !== before && this.isAttached) {
      void this.refresh();
    }
  }

  protected onAfterAttach(): void {
    void this._poll.start();
  }

  protected onBeforeDetach(): void {
    void this._poll.stop();
  }

  /** The panel opened again: what it shows may be an interval old. */
  protected onAfterShow(): void {
    if (this.isAttached) {
      void this.refresh();
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._poll.dispose();
    super.dispose();
  }

  /** Show another cluster: remembered for this browser session, shown at once. */
  private _pick(id: string): void {
    this._choice = id;
    this._newClusters.clear();
    storeChoice(id);
    this._palette = new JobPalette();
    void this.refresh();
  }

  /** Ask the server now (a click, a pick, the command); the interval then counts from this round. */
  async refresh(): Promise<void> {
    if (!this.isAttached) {
      return; // not in the page: nothing to draw, and the poll starts when it is
    }
    if (this._running) {
      this._again = true; // a pick or a click while a round runs: one more when it is done
      return this._running.catch(() => undefined);
    }
    await this._poll.refresh();
    await this._poll.tick.catch(() => undefined);
  }

  /**
   * The poll's request: one round, and one more when a click or a pick came while it ran (however
   * many came). Rejects when the server did not answer, so that the poll waits longer before the next.
   */
  private _round(): Promise<void> {
    const run = async () => {
      do {
        this._again = false;
        await this._refreshOnce();
      } while (this._again);
    };
    this._running = run().finally(() => {
      this._running = null;
    });
    return this._running;
  }

  private async _refreshOnce(): Promise<void> {
    try {
      const clusters = await getClusters();
      const { cluster, note } = resolveChoice(this._choice, clusters);
      setCluster(cluster.own ? null : cluster.id);
      this._ownShown = cluster.own;
      fillPicker(this._picker, clusters.clusters, cluster.id);
      const fresh = this._freshClusters(clusters.clusters, cluster);
      const told =
        note ||
        (fresh.length
          ? `${fresh.join(', ')} is running now: pick it above to see it`
          : null);
      this._clusterNote.hidden = told === null;
      this._clusterNote.textContent = told || '';
      this._clusterNote.dataset.kind = note
        ? 'gone'
        : fresh.length
          ? 'new'
          : '';
      this._renderCluster(cluster);
      const status = await getStatus();
      this._renderStatus(status);
      if (!status.reachable) {
        this._showError(
          status.error || 'the Slurm controller is not reachable'
        );
        return;
      }
      const [nodes, queue] = await Promise.all([
        getNodes(),
        getQueue(this._scope)
      ]);
      this._showError(null);
      // the map and "all jobs" come from the server's whole-cluster listing, "my jobs" from its own one
      this._renderStatus(status, queue.age_s ?? 0, this._scope === 'all');
      const ctx: IMapContext = {
        palette: this._palette,
        jobs: new Map(queue.jobs.map(j => [j.job_id, j]))
      };
      this._palette.keep(ctx.jobs.keys());
      // colours in id order, so that the slots follow the jobs' ids
      for (const id of [...ctx.jobs.keys()].sort(
        (a, b) => a.length - b.length || a.localeCompare(b)
      )) {
        this._palette.colour(id);
      }
      const seen = renderMap(this._map, nodes.nodes, ctx);
      renderLegend(this._legend, seen, ctx);
      await this._askSession(cluster.own);
      await this.kernels.refresh(); // the server's own kernels (no Slurm RPC); before the jobs: no cancel for theirs
      renderSession(
        this._sessionRow,
        cluster.own ? this._session : null,
        queue.jobs.find(j => j.job_id === this._session?.job_id) || null
      );
      this._renderJobs(queue);
      this._announce(this._watcher.update(cluster.id, queue.jobs));
      // Recent jobs follow the queue: asked again as soon as one of my jobs changed state or left it, and
      // once more a round later (the server asks accounting again then, which may lag the controller)
      const mine = queue.jobs.filter(j => j.mine);
      const key = mine.map(j => `${j.job_id}:${j.state}`).join(' ');
      if (this._myQueueKey !== null && key !== this._myQueueKey) {
        this._recentRounds = 2;
      }
      this._myQueueKey = key;
      const force = this._recentRounds > 0;
      this._recentRounds = Math.max(0, this._recentRounds - 1);
      void this._recent.refresh(
        cluster.own ? null : cluster.id,
        force,
        new Set(mine.map(j => j.job_id))
      );
    } catch (error) {
      this._showError(
        error instanceof ApiError ? error.message : String(error)
      );
      throw error;
    }
  }

  /** The job this server runs in, asked of the server once (its own cluster only: a sandbox is another Slurm);
   * asked again next round when the server could not say. */
  private async _askSession(own: boolean): Promise<void> {
    if (!own || this._sessionAsked) {
      return;
    }
    try {
      this._session = await getSession();
      this._sessionAsked = true;
    } catch {
      this._session = null;
    }
  }

  /** A JupyterLab notification per job of mine that started or ended since the last round. */
  private _announce(events: IJobEvent[]): void {
    for (const event of events) {
      const message = eventMessage(event);
      if (event.kind === 'started') {
        Notification.success(message, { autoClose: 8000 });
      } else if (
        ['FAILED', 'TIMEOUT', 'OUT_OF_MEMORY', 'NODE_FAIL'].includes(
          event.job.state
        )
      ) {
        Notification.warning(message, { autoClose: 12000 });
      } else {
        Notification.info(message, { autoClose: 8000 });
      }
    }
  }

  /** Labels of the clusters that appeared since the sidebar first asked (a sandbox started in a
   * notebook), until one is picked or they go. */
  private _freshClusters(clusters: ICluster[], shown: ICluster): string[] {
    const ids = new Set(clusters.map(c => c.id));
    if (this._seenClusters !== null) {
      for (const id of ids) {
        if (!this._seenClusters.has(id)) {
          this._newClusters.add(id);
        }
      }
    }
    this._seenClusters = ids;
    return clusters
      .filter(c => this._newClusters.has(c.id) && c.id !== shown.id)
      .map(c => c.label);
  }

  private _showError(message: string | null): void {
    this._error.hidden = message === null;
    this._error.textContent = message || '';
  }

  private _renderCluster(cluster: ICluster): void {
    this._clusterName.textContent = cluster.label;
    this._clusterName.dataset.cluster = cluster.id;
    this._clusterName.dataset.sandbox = cluster.sandbox || '';
    this._clusterName.title =
      `cluster ${cluster.name || '?'}` +
      (cluster.sandbox
        ? `, a slurmlab sandbox of profile ${cluster.sandbox}`
        : '') +
      (cluster.conf
        ? ` (${cluster.conf})`
        : " (this server's Slurm configuration)");
  }

  private _renderStatus(status: IStatus, dataAge = 0, whole = false): void {
    if (status.cluster) {
      this._renderCluster(status.cluster);
    }
    this._statusLine.textContent = statusText(status, dataAge, whole);
    this._statusLine.dataset.stale = String(isStale(status, dataAge, whole));
    this._statusLine.dataset.reachable = String(status.reachable);
  }

  private _renderJobs(queue: IQueue): void {
    const scrolled = this._jobTable.node.scrollTop; // a new answer keeps the place in a long table
    this._jobs.replaceChildren();
    const problems = queue.problems || [];
    if (problems.length) {
      const note = el(
        'div',
        'slurmlab-Problems',
        `${problems.length} job record(s) could not be read` +
          (problems[0].record ? ` (job ${problems[0].record})` : '')
      );
      note.title = problems.map(p => p.message).join('\n');
      this._jobs.appendChild(note);
    }
    if (!queue.jobs.length) {
      this._jobs.appendChild(
        el(
          'div',
          'slurmlab-Empty',
          queue.scope === 'mine' ? `no jobs of ${queue.user}` : 'no jobs'
        )
      );
      return;
    }
    this._jobs.appendChild(this._jobTable.node);
    this._jobTable.render(queue.jobs, scrolled); // jobtable.ts: only the rows in view past 200 jobs
  }

  private _jobHead(): HTMLElement {
    const head = el('tr');
    for (const [title, cls] of [
      ['', 'slurmlab-ColSwatch'],
      ['job · GPUs', 'slurmlab-ColJob'],
      ['state · left', 'slurmlab-ColState'],
      ['', 'slurmlab-ColAction']
    ]) {
      head.appendChild(el('th', cls, title));
    }
    return head;
  }

  /** A job's line, and under a pending job the line that says why. */
  private _jobRows(job: IJob): HTMLElement[] {
    const rows = [this._jobRow(job)];
    if (job.state === 'PENDING') {
      const more = el('tr', 'slurmlab-PendingRow');
      more.dataset.jobId = job.job_id;
      more.appendChild(el('td', 'slurmlab-Swatch')).style.background =
        this._palette.colour(job.job_id);
      const cell = el('td');
      cell.colSpan = 3;
      cell.appendChild(pendingBlock(job));
      more.appendChild(cell);
      rows.push(more);
    }
    return rows;
  }

  private _jobRow(job: IJob): HTMLElement {
    const row = el('tr', 'slurmlab-Job');
    row.dataset.jobId = job.job_id;
    row.dataset.state = job.state;
    const swatch = el('td', 'slurmlab-Swatch');
    swatch.style.background = this._palette.colour(job.job_id);
    row.appendChild(swatch);
    const id = el('td', 'slurmlab-JobId');
    // one line: the id, then the name cut with an ellipsis; the whole name in the tooltip
    const line = el('div', 'slurmlab-JobLine');
    line.appendChild(el('span', 'slurmlab-JobNumber', job.display_id));
    const name = el('span', 'slurmlab-JobName', job.name);
    name.title = job.name;
    line.appendChild(name);
    line.title = `${job.display_id} ${job.name} · ${job.user || '?'} · ${job.partition || ''} · ${job.nodes || ''}`;
    id.appendChild(line);
    id.appendChild(el('div', 'slurmlab-JobGpus', gpuSummary(job)));
    row.appendChild(id);
    // the state, and the time left under it: one column, so that the name has the width
    const stateCell = el('td', 'slurmlab-StateCell');
    const state = el('div', 'slurmlab-JobState', job.state);
    state.title = job.state;
    stateCell.appendChild(state);
    const left = job.ends_at
      ? formatSeconds(secondsUntil(job.ends_at))
      : job.time_limit_s === null
        ? 'unlimited'
        : '—';
    stateCell.appendChild(el('div', 'slurmlab-TimeLeft', left));
    row.appendChild(stateCell);
    const actions = el('td');
    if (this._ownShown && job.job_id === this._session?.job_id) {
      // the job this Jupyter server runs in: cancelling it would end this page's session
      // (said under its GPUs: the action column is one button wide)
      row.dataset.session = 'true';
      id.appendChild(
        el('div', 'slurmlab-SessionMark', 'this session: ends with the server')
      );
    } else if (this._ownShown && this.kernels.holds(job.job_id)) {
      // a kernel's job: the kernel owns it (shutting the kernel down releases it)
      row.dataset.kernel = 'true';
      id.appendChild(
        el(
          'div',
          'slurmlab-KernelMark',
          "a kernel's job: shut the kernel down to release it"
        )
      );
    } else if (job.mine) {
      const cancel = el('button', 'slurmlab-Cancel', '✕');
      cancel.title = `scancel ${job.job_id}`;
      cancel.onclick = () => void this._confirmCancel(job);
      actions.appendChild(cancel);
    }
    row.appendChild(actions);
    return row;
  }

  private async _confirmCancel(job: IJob): Promise<void> {
    const result = await showDialog({
      title: 'Cancel Slurm job?',
      body: `Cancel job ${job.job_id} (${job.name}, ${job.state})? Its processes are killed.`,
      buttons: [
        Dialog.cancelButton({ label: 'Keep' }),
        Dialog.warnButton({ label: 'Cancel job' })
      ]
    });
    if (!result.button.accept) {
      return;
    }
    try {
      await cancelJob(job.job_id);
    } catch (error) {
      this._showError(
        error instanceof ApiError ? error.message : String(error)
      );
    }
    await this.refresh();
  }
}
