/**
 * The Slurm queue in the main area (the command "Slurm: open queue", the Launcher's "Slurm queue"): my jobs
 * (or everyone's) one row each, with what the narrow sidebar has no room for — partition, nodes, GPUs, the
 * reason in words — and Hold / Release / Cancel on my own jobs.
 *
 * Hold and Release are `scontrol uhold|release` of a pending job; the server checks, as for cancel, that the
 * server's Unix user owns the job from Slurm's uid of it (never from a field of the job's record that its
 * submitter wrote), and refuses a job that has started. The buttons show only where they can work: Hold on a
 * pending job that is not held, Release on one the user held (an administrator's hold is theirs to lift).
 *
 * It asks the server for the queue on the sidebar's interval while it is in sight; the server polls Slurm
 * on its own schedule, so an open queue view adds no RPC to the controller.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { Poll } from '@lumino/polling';
import { Widget } from '@lumino/widgets';

import {
  ApiError,
  cancelJob,
  currentCluster,
  getQueue,
  getSession,
  holdOrRelease,
  IJob,
  IQueue
} from './api';
import { el } from './dom';
import {
  clockTime,
  formatSeconds,
  gpuSummary,
  pollFrequency,
  secondsUntil
} from './sidebar';

/** What a job's row offers: hold and release only where Slurm does them for its owner; nothing for the job this
 * Jupyter server runs in (`session`: cancelling it would end the session, and the server refuses it). */
export function jobActions(
  job: IJob,
  session: string | null = null
): Array<'hold' | 'release' | 'cancel'> {
  if (!job.mine || job.job_id === session) {
    return [];
  }
  const actions: Array<'hold' | 'release' | 'cancel'> = [];
  if (job.state === 'PENDING') {
    // JobHeldUser: held by its owner (Release lifts it); JobHeldAdmin: only an administrator can
    if (job.reason === 'JobHeldUser') {
      actions.push('release');
    } else if (job.reason !== 'JobHeldAdmin') {
      actions.push('hold');
    }
  }
  actions.push('cancel');
  return actions;
}

const ACTION_WORDS: Record<string, string> = {
  hold: 'Hold',
  release: 'Release',
  cancel: 'Cancel'
};

const ACTION_TITLES: Record<string, string> = {
  hold: 'scontrol uhold: Slurm keeps it pending until you release it',
  release: 'scontrol release: Slurm may start it again',
  cancel: 'scancel: end the job (its processes are killed)'
};

/** "in 00:12:00 (14:05)" for a pending job Slurm has a start for; the time left for a running one. */
export function whenText(job: IJob, now: Date = new Date()): string {
  if (job.state === 'PENDING') {
    return job.expected_start
      ? `starts ${clockTime(job.expected_start, now)} (in ${formatSeconds(secondsUntil(job.expected_start, now.getTime()))})`
      : 'no expected start yet';
  }
  if (job.ends_at) {
    return `${formatSeconds(secondsUntil(job.ends_at, now.getTime()))} left`;
  }
  return job.time_limit_s === null ? 'no time limit' : '—';
}

const COLUMNS: Array<[string, string]> = [
  ['job', 'slurmlab-QCol-job'],
  ['name', 'slurmlab-QCol-name'],
  ['user', 'slurmlab-QCol-user'],
  ['state', 'slurmlab-QCol-state'],
  ['why / when', 'slurmlab-QCol-when'],
  ['partition', 'slurmlab-QCol-partition'],
  ['nodes · GPUs', 'slurmlab-QCol-gpus'],
  ['', 'slurmlab-QCol-actions']
];

export class QueuePanel extends Widget {
  private _scope: 'mine' | 'all' = 'mine';
  private readonly _poll: Poll;
  private readonly _status: HTMLElement;
  private readonly _error: HTMLElement;
  private readonly _table: HTMLTableElement;

  /** The job this Jupyter server runs in (null: none; undefined: not asked yet). */
  private _session: string | null | undefined = undefined;

  constructor(refreshSeconds: number) {
    super();
    this.id = 'slurmlab-queue';
    this.addClass('slurmlab-Queue');
    this.title.label = 'Slurm queue';
    this.title.caption = 'Your Slurm jobs: hold, release, cancel';
    this.title.closable = true;
    this._poll = new Poll({
      auto: false,
      factory: () => this._refreshOnce(),
      frequency: pollFrequency(refreshSeconds),
      name: 'slurmlab-lab:queue',
      standby: 'when-hidden'
    });

    const bar = el('div', 'slurmlab-QueueBar');
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
    bar.appendChild(scope);
    const refresh = el('button', 'slurmlab-Refresh jp-mod-styled', 'Refresh');
    refresh.onclick = () => void this.refresh();
    bar.appendChild(refresh);
    this._status = el('span', 'slurmlab-QueueStatus', 'asking the server…');
    bar.appendChild(this._status);
    this.node.appendChild(bar);
    this._error = el('div', 'slurmlab-Error');
    this._error.hidden = true;
    this.node.appendChild(this._error);
    this._table = el('table', 'slurmlab-QueueTable');
    this.node.appendChild(this._table);
  }

  set refreshInterval(seconds: number) {
    this._poll.frequency = pollFrequency(seconds);
  }

  protected onAfterAttach(): void {
    void this._poll.start();
  }

  protected onBeforeDetach(): void {
    void this._poll.stop();
  }

  dispose(): void {
    if (!this.isDisposed) {
      this._poll.dispose();
    }
    super.dispose();
  }

  async refresh(): Promise<void> {
    if (this.isAttached) {
      await this._poll.refresh();
      await this._poll.tick.catch(() => undefined);
    }
  }

  private async _refreshOnce(): Promise<void> {
    try {
      const queue = await getQueue(this._scope);
      if (this._session === undefined && currentCluster() === null) {
        // the job this server runs in, asked once (its own cluster only: a sandbox is another Slurm)
        this._session = await getSession()
          .then(answer => answer.job_id)
          .catch(() => undefined);
      }
      this._render(queue);
    } catch (error) {
      this._status.textContent =
        error instanceof ApiError ? error.message : String(error);
      throw error;
    }
  }

  private _showError(message: string | null): void {
    this._error.hidden = message === null;
    this._error.textContent = message || '';
  }

  private _render(queue: IQueue): void {
    const count = queue.jobs.length;
    this._status.textContent =
      (queue.scope === 'mine'
        ? `${count} job${count === 1 ? '' : 's'} of ${queue.user}`
        : `${count} job${count === 1 ? '' : 's'} in the queue`) +
      (queue.problems.length
        ? ` · ${queue.problems.length} record(s) could not be read`
        : '');
    const head = el('tr');
    for (const [title, cls] of COLUMNS) {
      head.appendChild(el('th', cls, title));
    }
    const rows: HTMLElement[] = [head];
    for (const job of queue.jobs) {
      rows.push(this._row(job));
    }
    this._table.replaceChildren(...rows);
  }

  private _row(job: IJob): HTMLElement {
    const row = el('tr', 'slurmlab-QueueJob');
    row.dataset.jobId = job.job_id;
    row.dataset.state = job.state;
    row.appendChild(el('td', 'slurmlab-QCol-job', job.display_id));
    const name = el('td', 'slurmlab-QCol-name', job.name);
    name.title = job.name;
    row.appendChild(name);
    row.appendChild(el('td', 'slurmlab-QCol-user', job.user || '?'));
    const state = el('td', 'slurmlab-QCol-state', job.state);
    row.appendChild(state);
    const when = el('td', 'slurmlab-QCol-when');
    if (job.state === 'PENDING') {
      const why = el(
        'div',
        'slurmlab-Reason',
        job.reason_words || 'Slurm has not looked at it yet'
      );
      why.title = `Slurm's reason: ${job.reason || 'none yet'}`;
      when.appendChild(why);
    }
    when.appendChild(el('div', 'slurmlab-QueueWhen', whenText(job)));
    row.appendChild(when);
    row.appendChild(el('td', 'slurmlab-QCol-partition', job.partition || ''));
    const gpus = el('td', 'slurmlab-QCol-gpus', gpuSummary(job));
    gpus.title = `${job.nodes || 'no nodes yet'} · ${job.gres || ''}`;
    row.appendChild(gpus);
    const actions = el('td', 'slurmlab-QCol-actions');
    const session = currentCluster() === null ? this._session : null;
    for (const action of jobActions(job, session ?? null)) {
      const button = el(
        'button',
        `jp-mod-styled slurmlab-QueueAction slurmlab-mod-${action}`,
        ACTION_WORDS[action]
      );
      button.dataset.action = action;
      button.title = ACTION_TITLES[action];
      button.onclick = () => void this._act(job, action);
      actions.appendChild(button);
    }
    row.appendChild(actions);
    return row;
  }

  private async _act(
    job: IJob,
    action: 'hold' | 'release' | 'cancel'
  ): Promise<void> {
    try {
      if (action === 'cancel') {
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
        await cancelJob(job.job_id);
      } else {
        await holdOrRelease(job.job_id, action);
      }
    } catch (error) {
      // said until the next action: the next refresh answers about the queue, not about this
      this._showError(
        `${ACTION_WORDS[action]} of job ${job.job_id} failed: ` +
          (error instanceof ApiError ? error.message : String(error))
      );
      return;
    }
    this._showError(null);
    await this.refresh();
  }
}
