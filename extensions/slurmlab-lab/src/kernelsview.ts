/**
 * The sidebar's "kernels on GPU nodes": each kernel this Jupyter server started inside a Slurm job (slurmlab's
 * kernel provisioner) with its notebook, job, state, why it waits while pending and its time left; and one
 * button per installed slurmlab kernel spec that opens a new notebook with it.
 *
 * A kernel's job has no cancel button here: the kernel owns it (shutting the kernel down releases it, a restart
 * keeps it); the section says so. The server asks Slurm nothing for this list (the provisioners already follow
 * their jobs), so it is asked every round of the sidebar.
 */
import { getKernels, IKernelJob, IKernels } from './api';
import { el } from './dom';
import { clockTime, hoursMinutes, secondsUntil } from './sidebar';

/** The state of a kernel's job in words, as the row shows it. */
export function kernelState(
  kernel: IKernelJob,
  now: number = Date.now()
): string {
  const job = kernel.job_id ? `job ${kernel.job_id}` : 'no job yet';
  switch (kernel.phase) {
    case 'checking':
      return `checking the request (${kernel.request})`;
    case 'pending': {
      const start = kernel.expected_start
        ? `; Slurm expects it to start at ${clockTime(kernel.expected_start, new Date(now))}`
        : '';
      const why = kernel.why || kernel.reason || 'waiting';
      return `${job} pending: ${why}${start}`;
    }
    case 'starting':
      return `${job} granted on ${kernel.nodes.join(',') || 'its node'}: the kernel starts`;
    case 'running': {
      const left = secondsUntil(kernel.ends_at, now);
      const gpus = kernel.gpus
        .map(g => `${g.node} GPU ${g.indices.join(',')}`)
        .join('; ');
      return (
        `${job} running on ${gpus || kernel.nodes.join(',') || 'its node'}` +
        (kernel.step ? ` (step ${kernel.step})` : '') +
        (left === null ? '' : `, ${hoursMinutes(left)} left`)
      );
    }
    default:
      return kernel.message || `${job}: ${kernel.phase}`;
  }
}

function kernelRow(kernel: IKernelJob, now: number): HTMLElement {
  const row = el('div', 'slurmlab-KernelRow');
  row.dataset.kernelId = kernel.kernel_id;
  row.dataset.phase = kernel.phase;
  if (kernel.job_id) {
    row.dataset.jobId = kernel.job_id;
  }
  const name = kernel.notebook || kernel.kernel_name;
  row.appendChild(el('div', 'slurmlab-KernelName', name));
  const state = el('div', 'slurmlab-KernelState', kernelState(kernel, now));
  state.title = kernel.message;
  row.appendChild(state);
  return row;
}

/** The section's list and buttons into `list` and `buttons` (`start`: opens a notebook with that spec). */
export function renderKernels(
  list: HTMLElement,
  buttons: HTMLElement,
  answer: IKernels,
  start: ((specName: string) => void) | null,
  now: number = Date.now()
): void {
  list.replaceChildren();
  if (!answer.kernels.length) {
    list.appendChild(
      el(
        'div',
        'slurmlab-KernelsNone',
        'no kernel of this server runs in a Slurm job'
      )
    );
  }
  for (const kernel of answer.kernels) {
    list.appendChild(kernelRow(kernel, now));
  }
  if (answer.kernels.length) {
    list.appendChild(el('div', 'slurmlab-KernelsWords', answer.words));
  }
  buttons.replaceChildren();
  for (const spec of answer.specs) {
    const button = el(
      'button',
      'slurmlab-KernelStart jp-mod-styled',
      `New notebook: ${spec.display_name}`
    );
    button.dataset.kernelName = spec.name;
    button.title = `a new notebook whose kernel runs in a Slurm job (${spec.name})`;
    button.disabled = start === null;
    button.onclick = () => start?.(spec.name);
    buttons.appendChild(button);
  }
}

/** The section: its heading, the kernels and the start buttons. */
export class KernelsSection {
  readonly node: HTMLElement;
  /** Opens a new notebook with the named kernel spec (set by the plugin, which has the app's commands). */
  start: ((specName: string) => void) | null = null;
  private readonly _list: HTMLElement;
  private readonly _buttons: HTMLElement;
  private _jobIds = new Set<string>();

  constructor() {
    this.node = el('div', 'slurmlab-Kernels');
    this.node.appendChild(el('h3', 'slurmlab-Section', 'kernels on GPU nodes'));
    this._list = el('div', 'slurmlab-KernelList');
    this._buttons = el('div', 'slurmlab-KernelButtons');
    this.node.appendChild(this._list);
    this.node.appendChild(this._buttons);
  }

  /** Whether one of the server's kernels runs in this job (of the server's own cluster). */
  holds(jobId: string): boolean {
    return this._jobIds.has(jobId);
  }

  async refresh(): Promise<void> {
    try {
      const answer = await getKernels();
      renderKernels(this._list, this._buttons, answer, this.start);
      this._jobIds = new Set(
        answer.kernels.map(k => k.job_id || '').filter(Boolean)
      );
      this.node.hidden = false;
    } catch {
      // a server without the route (an older slurmlab) or a failed request: the section is left out
      this.node.hidden = true;
    }
  }
}
