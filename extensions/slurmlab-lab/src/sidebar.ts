/**
 * The "Slurm GPUs" sidebar: the cluster's GPU map (nodes x GPUs, coloured by job, shards as
 * fractions) and the user's jobs with a cancel action.
 *
 * Plain DOM in a Lumino widget keeps the extension free of a React dependency; the panel is
 * rebuilt from each answer, which is small (one row per node and per job).
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import {
  ApiError,
  cancelJob,
  getNodes,
  getQueue,
  getStatus,
  IGpuSlot,
  IJob,
  INode,
  IQueue,
  IStatus
} from './api';

export const DEFAULT_REFRESH_S = 5;

/** A stable colour per job id, so the same job has the same colour on every node. */
export function jobColour(jobId: string): string {
  let hash = 0;
  for (const ch of jobId) {
    hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
  }
  return `hsl(${(hash * 137) % 360}, 60%, 55%)`;
}

/** Seconds from now until an ISO time (null when there is none). */
export function secondsUntil(iso: string | null, now: number = Date.now()): number | null {
  if (!iso) {
    return null;
  }
  const at = Date.parse(iso);
  return Number.isNaN(at) ? null : Math.max(0, (at - now) / 1000);
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

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className?: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
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
    parts.push(g.kind === 'gpu' ? where : `${where} ${g.kind}×${g.count ?? '?'}`);
    perNode.set(g.node, parts);
  }
  const types = [...new Set(job.gpus.filter(g => g.kind === 'gpu' && g.type).map(g => g.type))];
  const nodes = [...perNode.entries()].map(([node, parts]) => `${node}: ${parts.join(',')}`);
  return nodes.join(' · ') + (types.length ? ` (${types.join(', ')})` : '');
}

export class SlurmSidebar extends Widget {
  private _refreshMs = DEFAULT_REFRESH_S * 1000;
  private _timer: number | null = null;
  private _scope: 'mine' | 'all' = 'mine';
  private _busy = false;
  private readonly _statusLine: HTMLElement;
  private readonly _map: HTMLElement;
  private readonly _jobs: HTMLElement;
  private readonly _error: HTMLElement;

  constructor() {
    super();
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

    this._statusLine = el('div', 'slurmlab-Status', 'connecting…');
    this._error = el('div', 'slurmlab-Error');
    this._error.hidden = true;
    this.node.appendChild(this._statusLine);
    this.node.appendChild(this._error);

    this.node.appendChild(el('h3', 'slurmlab-Section', 'GPU map'));
    this._map = el('div', 'slurmlab-Map');
    this.node.appendChild(this._map);

    const jobsHeader = el('div', 'slurmlab-JobsHeader');
    jobsHeader.appendChild(el('h3', 'slurmlab-Section', 'Jobs'));
    const scope = el('select', 'slurmlab-Scope');
    for (const value of ['mine', 'all']) {
      const option = el('option', undefined, value === 'mine' ? 'my jobs' : 'all jobs');
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
  }

  /** Seconds between refreshes (from the settings). */
  set refreshInterval(seconds: number) {
    this._refreshMs = Math.max(1, seconds) * 1000;
    if (this._timer !== null) {
      this._startTimer();
    }
  }

  protected onAfterAttach(): void {
    this._startTimer();
    void this.refresh();
  }

  protected onBeforeDetach(): void {
    this._stopTimer();
  }

  dispose(): void {
    this._stopTimer();
    super.dispose();
  }

  private _startTimer(): void {
    this._stopTimer();
    this._timer = window.setInterval(() => {
      if (this.isVisible) {
        void this.refresh();
      }
    }, this._refreshMs);
  }

  private _stopTimer(): void {
    if (this._timer !== null) {
      window.clearInterval(this._timer);
      this._timer = null;
    }
  }

  async refresh(): Promise<void> {
    if (this._busy) {
      return;
    }
    this._busy = true;
    try {
      const status = await getStatus();
      this._renderStatus(status);
      if (!status.reachable) {
        this._showError(status.error || 'the Slurm controller is not reachable');
        return;
      }
      const [nodes, queue] = await Promise.all([getNodes(), getQueue(this._scope)]);
      this._showError(null);
      this._renderStatus(status, queue.age_s ?? 0);
      this._renderMap(nodes.nodes);
      this._renderJobs(queue);
    } catch (error) {
      this._showError(error instanceof ApiError ? error.message : String(error));
    } finally {
      this._busy = false;
    }
  }

  private _showError(message: string | null): void {
    this._error.hidden = message === null;
    this._error.textContent = message || '';
  }

  private _renderStatus(status: IStatus, dataAge = 0): void {
    const state = status.reachable ? 'controller up' : 'controller DOWN';
    const version = status.version ? `Slurm ${status.version}` : 'Slurm ?';
    // Data older than two intervals means Slurm did not answer the last polls: say how old.
    const age = dataAge;
    const stale = age > 2 * status.poll_interval_s ? ` · data ${formatSeconds(age)} old` : '';
    this._statusLine.textContent = `${state} · ${version} · user ${status.user} · every ${status.poll_interval_s}s${stale}`;
    this._statusLine.dataset.stale = String(stale !== '');
    this._statusLine.dataset.reachable = String(status.reachable);
  }

  private _renderMap(nodes: INode[]): void {
    this._map.replaceChildren();
    if (!nodes.length) {
      this._map.appendChild(el('div', 'slurmlab-Empty', 'no nodes'));
      return;
    }
    for (const node of nodes) {
      const row = el('div', 'slurmlab-NodeRow');
      row.dataset.node = node.name;
      const label = el('div', 'slurmlab-NodeName', node.name);
      label.title = `${node.name}: ${node.state} (${node.partitions.join(', ')})`;
      row.appendChild(label);
      const cells = el('div', 'slurmlab-GpuCells');
      if (!node.gpus.length) {
        cells.appendChild(el('span', 'slurmlab-NoGpu', 'no GPUs'));
      }
      for (const gpu of node.gpus) {
        cells.appendChild(this._gpuCell(node, gpu));
      }
      row.appendChild(cells);
      row.appendChild(el('div', 'slurmlab-NodeState', node.state.toLowerCase()));
      this._map.appendChild(row);
    }
  }

  private _gpuCell(node: INode, gpu: IGpuSlot): HTMLElement {
    const cell = el('div', 'slurmlab-Gpu');
    cell.dataset.gpu = String(gpu.index);
    cell.dataset.jobs = gpu.jobs.join(',');
    if (gpu.mig) {
      cell.classList.add('slurmlab-mod-mig');
    }
    const busy = gpu.whole || gpu.shards_used > 0;
    if (gpu.whole && gpu.jobs.length) {
      cell.style.background = jobColour(gpu.jobs[0]);
    } else if (gpu.shards_total > 0 && gpu.shards_used > 0) {
      // A shared GPU: the filled part shows the fraction of its shards in use.
      const pct = Math.round((100 * gpu.shards_used) / gpu.shards_total);
      const colour = gpu.jobs.length ? jobColour(gpu.jobs[0]) : 'var(--jp-brand-color1)';
      cell.style.background = `linear-gradient(to top, ${colour} ${pct}%, transparent ${pct}%)`;
      cell.appendChild(el('span', 'slurmlab-Shards', `${gpu.shards_used}/${gpu.shards_total}`));
    }
    cell.classList.toggle('slurmlab-mod-busy', busy);
    const label = gpu.type ? `${gpu.type}` : 'gpu';
    const jobs = gpu.jobs.length ? ` · job ${gpu.jobs.join(', ')}` : ' · free';
    const shards = gpu.shards_total ? ` · shards ${gpu.shards_used}/${gpu.shards_total}` : '';
    cell.title = `${node.name} GPU ${gpu.index} (${label})${jobs}${shards}`;
    return cell;
  }

  private _renderJobs(queue: IQueue): void {
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
        el('div', 'slurmlab-Empty', queue.scope === 'mine' ? `no jobs of ${queue.user}` : 'no jobs')
      );
      return;
    }
    const table = el('table', 'slurmlab-JobTable');
    const head = el('tr');
    for (const title of ['', 'job · GPUs', 'state', 'left', '']) {
      head.appendChild(el('th', undefined, title));
    }
    table.appendChild(head);
    for (const job of queue.jobs) {
      const row = el('tr', 'slurmlab-Job');
      row.dataset.jobId = job.job_id;
      const swatch = el('td', 'slurmlab-Swatch');
      swatch.style.background = jobColour(job.job_id);
      row.appendChild(swatch);
      const id = el('td', 'slurmlab-JobId', `${job.display_id} ${job.name}`);
      id.title = `${job.user || '?'} · ${job.partition || ''} · ${job.nodes || ''}`;
      id.appendChild(el('div', 'slurmlab-JobGpus', gpuSummary(job)));
      row.appendChild(id);
      const state = el('td', 'slurmlab-JobState', job.state);
      if (job.reason && job.reason !== 'None') {
        state.appendChild(el('div', 'slurmlab-Reason', job.reason));
      }
      row.appendChild(state);
      const left = job.ends_at
        ? formatSeconds(secondsUntil(job.ends_at))
        : job.time_limit_s === null
          ? 'unlimited'
          : '—';
      row.appendChild(el('td', 'slurmlab-TimeLeft', left));
      const actions = el('td');
      if (job.mine) {
        const cancel = el('button', 'slurmlab-Cancel', '✕');
        cancel.title = `scancel ${job.job_id}`;
        cancel.onclick = () => void this._confirmCancel(job);
        actions.appendChild(cancel);
      }
      row.appendChild(actions);
      table.appendChild(row);
    }
    this._jobs.appendChild(table);
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
      this._showError(error instanceof ApiError ? error.message : String(error));
    }
    await this.refresh();
  }
}
