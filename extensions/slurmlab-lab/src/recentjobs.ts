/**
 * The sidebar's "Recent jobs": the server user's jobs of the last day from Slurm accounting (`sacct`), each
 * with its end state coloured and in plain words, elapsed vs limit, GPUs, and the efficiency line.
 *
 * A slow list (it changes when a job ends, and sacct asks slurmdbd): asked once a minute, and at once when the
 * cluster shown changes or one of my jobs in the queue started, ended or left it (the sidebar says so; the
 * server then asks accounting again too, and keeps its answer otherwise). Only jobs that have ended: a job
 * still in the queue (running, pending) is in the job list above, not repeated here. Accounting off is one
 * line saying how to turn it on.
 */
import { ApiError, getRecentJobs, IRecentJob, IRecentJobs } from './api';
import { el } from './dom';
import { formatSeconds } from './sidebar';

export const RECENT_REFRESH_S = 60;

/** How a state is coloured: ok, running, waiting, stopped (time, memory, node), cancelled, failed. */
export function stateFamily(state: string): string {
  switch (state) {
    case 'COMPLETED':
      return 'ok';
    case 'RUNNING':
    case 'COMPLETING':
      return 'running';
    case 'PENDING':
    case 'REQUEUED':
    case 'SUSPENDED':
      return 'waiting';
    case 'TIMEOUT':
    case 'OUT_OF_MEMORY':
    case 'DEADLINE':
    case 'PREEMPTED':
      return 'stopped';
    case 'CANCELLED':
      return 'cancelled';
    default:
      return 'failed';
  }
}

const FAMILY_COLOUR: Record<string, string> = {
  ok: 'var(--jp-success-color1, #388e3c)',
  running: 'var(--jp-brand-color1, #1976d2)',
  waiting: 'var(--jp-ui-font-color2, #757575)',
  stopped: 'var(--jp-warn-color1, #f57c00)',
  cancelled: 'var(--jp-ui-font-color2, #757575)',
  failed: 'var(--jp-error-color1, #d32f2f)'
};

/** "00:10:02 of 00:10:00": how long it ran against its limit. */
export function elapsedText(job: IRecentJob): string {
  const ran = formatSeconds(job.elapsed_s);
  return job.time_limit_s === null
    ? ran
    : `${ran} of ${formatSeconds(job.time_limit_s)}`;
}

function recentRow(job: IRecentJob): HTMLElement {
  const row = el('div', 'slurmlab-RecentJob');
  row.dataset.jobId = job.job_id;
  row.dataset.state = job.state;
  const family = stateFamily(job.state);
  row.dataset.family = family;
  row.style.margin = '0 0 6px 0';
  // one line: id, name (cut with an ellipsis, whole in the tooltip), state at the right
  const head = el('div', 'slurmlab-RecentLine');
  Object.assign(head.style, {
    display: 'flex',
    gap: '0.5em',
    alignItems: 'baseline'
  });
  head.appendChild(el('span', 'slurmlab-JobNumber', job.job_id));
  const name = el('span', 'slurmlab-JobName', job.name);
  name.title = job.name;
  Object.assign(name.style, {
    flex: '1',
    minWidth: '0',
    overflow: 'hidden',
    textOverflow: 'ellipsis',
    whiteSpace: 'nowrap'
  });
  head.appendChild(name);
  const state = el('span', 'slurmlab-RecentState', job.state);
  state.style.color = FAMILY_COLOUR[family];
  state.style.fontWeight = 'bold';
  state.title = job.state_words;
  head.appendChild(state);
  row.appendChild(head);
  const exit =
    job.exit_code !== null && (job.exit_code !== 0 || job.signal)
      ? ` · exit ${job.exit_code}`
      : '';
  const sig = job.signal ? ` (signal ${job.signal})` : '';
  const gpus = job.gpus ? ` · ${job.gpus} GPU${job.gpus === 1 ? '' : 's'}` : '';
  row.appendChild(
    el(
      'div',
      'slurmlab-RecentWords',
      `${job.state_words} · ${elapsedText(job)}${gpus}${exit}${sig}`
    )
  );
  if (job.efficiency) {
    const eff = el(
      'div',
      'slurmlab-RecentEfficiency',
      job.efficiency.replace(/^Efficiency of job \S+: /, '')
    );
    eff.title = job.efficiency;
    eff.style.opacity = '0.75';
    row.appendChild(eff);
  }
  return row;
}

/** A job accounting still lists as not ended, or that is in the queue now (the list above shows it). */
export function stillActive(
  job: IRecentJob,
  active: ReadonlySet<string> = new Set()
): boolean {
  const family = stateFamily(job.state);
  return family === 'running' || family === 'waiting' || active.has(job.job_id);
}

/** Fill `into` from one answer: a line when accounting is off or failed, else one row per ended job
 * (`active`: the ids of my jobs in the queue now, left out with any job accounting says is not over). */
export function renderRecent(
  into: HTMLElement,
  answer: IRecentJobs,
  active: ReadonlySet<string> = new Set()
): void {
  into.replaceChildren();
  if (answer.message) {
    const line = el('div', 'slurmlab-RecentMessage', answer.message);
    line.dataset.accounting = String(answer.accounting);
    into.appendChild(line);
    return;
  }
  const ended = answer.jobs.filter(job => !stillActive(job, active));
  if (!ended.length) {
    into.appendChild(
      el(
        'div',
        'slurmlab-Empty',
        `no ended jobs of ${answer.user} in the last ${answer.since_hours} h`
      )
    );
    return;
  }
  for (const job of ended) {
    into.appendChild(recentRow(job));
  }
}

/** The section: its heading and list, refreshed on its own slow cadence. */
export class RecentJobsSection {
  readonly node: HTMLElement;
  private readonly _list: HTMLElement;
  private _cluster: string | null | undefined = undefined;
  private _askedAt = 0;
  private _busy = false;
  private _answer: IRecentJobs | null = null;
  private _active: ReadonlySet<string> = new Set();

  constructor() {
    this.node = el('div', 'slurmlab-Recent');
    this.node.appendChild(el('h3', 'slurmlab-Section', 'Recent jobs'));
    this._list = el('div', 'slurmlab-RecentJobs', 'asking Slurm accounting…');
    this.node.appendChild(this._list);
  }

  /** Ask again when the cluster shown changed, a minute has passed, or `force` (the sidebar calls this each
   * round, with my jobs in the queue now as `active`: left out at once, without asking). */
  async refresh(
    cluster: string | null,
    force = false,
    active: ReadonlySet<string> = new Set()
  ): Promise<void> {
    if (this._answer && !sameSet(active, this._active)) {
      renderRecent(this._list, this._answer, active);
    }
    this._active = active;
    const due = Date.now() - this._askedAt > RECENT_REFRESH_S * 1000;
    if (this._busy || (!force && !due && cluster === this._cluster)) {
      return;
    }
    this._busy = true;
    this._cluster = cluster;
    this._askedAt = Date.now();
    try {
      this._answer = await getRecentJobs();
      renderRecent(this._list, this._answer, this._active);
    } catch (error) {
      this._answer = null;
      this._list.replaceChildren(
        el(
          'div',
          'slurmlab-RecentMessage',
          error instanceof ApiError ? error.message : String(error)
        )
      );
    } finally {
      this._busy = false;
    }
  }
}

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  return a.size === b.size && [...a].every(x => b.has(x));
}
