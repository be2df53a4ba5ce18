/**
 * JupyterLab notifications when one of the user's jobs starts or ends, from the queue answers the sidebar
 * already asks for at every round: no request of its own, and no RPC to the Slurm controller (the server's
 * poller asks Slurm on its own schedule whether or not anyone watches).
 *
 * `JobWatcher` compares one answer with the one before: a job of mine that runs now and did not before
 * (pending, or not yet listed) has started; one that was listed and is gone, or is completing, has ended.
 * The first answer, and the first after the cluster shown changed, only sets what was seen: opening the lab
 * does not announce every job that is already running.
 */
import type { IJob } from './api';

export type JobEventKind = 'started' | 'ended';

export interface IJobEvent {
  kind: JobEventKind;
  /** The job as last seen (for an ended job: its last listing before it left). */
  job: IJob;
}

/** States in which a job holds its resources and runs (a job listed in one of these has started). */
const RUNNING = new Set(['RUNNING', 'CONFIGURING']);
/** States a job passes through as it ends, still listed for a moment. */
const ENDING = new Set([
  'COMPLETING',
  'COMPLETED',
  'CANCELLED',
  'FAILED',
  'TIMEOUT',
  'NODE_FAIL',
  'OUT_OF_MEMORY',
  'PREEMPTED',
  'BOOT_FAIL',
  'DEADLINE'
]);

export class JobWatcher {
  private _seen: Map<string, IJob> | null = null;
  private _cluster: string | null = null;
  /** Ended jobs already announced (a COMPLETING job is listed for a few rounds, then leaves). */
  private readonly _endedSaid = new Set<string>();

  /** The starts and ends among my jobs since the last answer about the same cluster. */
  update(cluster: string, jobs: IJob[]): IJobEvent[] {
    const mine = new Map(jobs.filter(j => j.mine).map(j => [j.job_id, j]));
    const before = this._cluster === cluster ? this._seen : null;
    this._cluster = cluster;
    this._seen = mine;
    if (before === null) {
      for (const job of mine.values()) {
        if (ENDING.has(job.state)) {
          this._endedSaid.add(job.job_id);
        }
      }
      return [];
    }
    const events: IJobEvent[] = [];
    for (const job of mine.values()) {
      const was = before.get(job.job_id);
      if (RUNNING.has(job.state) && (!was || !RUNNING.has(was.state))) {
        events.push({ kind: 'started', job });
      } else if (ENDING.has(job.state) && !this._endedSaid.has(job.job_id)) {
        this._endedSaid.add(job.job_id);
        events.push({ kind: 'ended', job });
      }
    }
    for (const [id, job] of before) {
      if (!mine.has(id)) {
        if (!this._endedSaid.has(id)) {
          events.push({ kind: 'ended', job });
        }
        this._endedSaid.delete(id);
      }
    }
    return events;
  }
}

/** The notification's text: "Slurm job 12 (train) started on node1" / "Slurm job 12 (train) ended". */
export function eventMessage(event: IJobEvent): string {
  const { job } = event;
  const what = `Slurm job ${job.display_id} (${job.name})`;
  if (event.kind === 'started') {
    return `${what} started${job.nodes ? ` on ${job.nodes}` : ''}`;
  }
  const how =
    ENDING.has(job.state) && job.state !== 'COMPLETING'
      ? `: ${job.state}`
      : job.state === 'PENDING'
        ? ' before it started'
        : '';
  return `${what} ended${how} — see Recent jobs in the Slurm GPUs sidebar`;
}
