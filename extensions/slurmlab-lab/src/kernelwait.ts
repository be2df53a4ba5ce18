/**
 * Why a notebook's kernel waits, beside JupyterLab's own kernel indicator in the notebook's toolbar: while
 * slurmlab's provisioner waits for the kernel's Slurm job (issue 30 point 2), "Waiting for GPUs (job <id>,
 * expected <time>): <why>"; the item is empty (hidden) once the kernel runs, and for every other kernel.
 *
 * jupyter_server answers a kernel's start only once the kernel runs (JupyterLab says "Initializing" until
 * then), so the notebook has no kernel id while its job pends: the kernel is found in the server's `kernels`
 * route by the notebook's path (the provisioner knows it from jupyter_server's JPY_SESSION_NAME) and, once
 * the notebook knows it, by its kernel id (a restart whose job waits again). Jupyter's pending kernels
 * (`use_pending_kernels`) would answer at once, but they are one switch for every kernel of the server, make
 * a shutdown of a waiting kernel wait for its start, and JupyterLab's indicator would then say "Connecting".
 *
 * The route asks Slurm nothing (the provisioner follows its job anyway); it is asked only while the
 * notebook's kernel is not yet running.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ISignal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { getKernels, IKernelJob, IKernels } from './api';
// the sidebar's module is loaded at activation anyway (index.ts); its clock format is the sidebar rows' own
// eslint-disable-next-line jupyter/prefer-lazy-imports
import { clockTime } from './sidebar';

/** The provisioner's phases of a start still under way. */
const WAITING_PHASES = ['checking', 'pending', 'starting'];
/** JupyterLab's display states of a kernel that runs: nothing to say then. */
const RUNNING_STATES = ['idle', 'busy'];
/** JupyterLab's display states of a notebook with no kernel starting. */
const STOPPED_STATES = ['unknown', '', 'dead'];
/** Seconds between two askings while the notebook's kernel is not running. */
export const WAIT_POLL_S = 2;

/** What the item needs of a notebook's session context (JupyterLab's ISessionContext has it all). */
export interface IWaitingSession {
  readonly path: string;
  readonly kernelDisplayStatus: string;
  readonly session: { kernel: { id: string; name: string } | null } | null;
  readonly kernelPreference: { name?: string };
  readonly statusChanged: ISignal<any, any>;
  readonly connectionStatusChanged: ISignal<any, any>;
  readonly kernelChanged: ISignal<any, any>;
}

/** The notebook's path as the server names it (a collaborative drive's "RTC:" prefix dropped). */
function localPath(path: string): string {
  const colon = path.indexOf(':');
  return colon > 0 && !path.slice(0, colon).includes('/')
    ? path.slice(colon + 1)
    : path;
}

/** The slurmlab kernel of this notebook whose start is still under way, if any. */
export function waitingKernel(
  kernels: IKernelJob[],
  notebook: { path: string; kernelId: string | null; kernelName: string | null }
): IKernelJob | null {
  const path = localPath(notebook.path);
  for (const kernel of kernels) {
    if (!WAITING_PHASES.includes(kernel.phase)) {
      continue;
    }
    if (notebook.kernelId && kernel.kernel_id === notebook.kernelId) {
      return kernel;
    }
    // no kernel id yet (the start is not answered): the notebook's path, and its kernel spec when known
    if (
      kernel.notebook === path &&
      (!notebook.kernelName || kernel.kernel_name === notebook.kernelName)
    ) {
      return kernel;
    }
  }
  return null;
}

/** The item's words for a kernel whose start is under way (`Waiting for GPUs (job 41, expected 10:42): …`). */
export function waitWords(
  kernel: IKernelJob,
  now: number = Date.now()
): string {
  const job = kernel.job_id ? ` (job ${kernel.job_id})` : '';
  switch (kernel.phase) {
    case 'checking':
      return `Checking the GPU request: ${kernel.request}`;
    case 'pending': {
      // the job and the expected start first: a narrow toolbar cuts the end of the (long) reason, the
      // tooltip has the whole sentence
      const why = kernel.why || kernel.reason || 'queued';
      const when = [
        kernel.job_id ? `job ${kernel.job_id}` : '',
        kernel.expected_start
          ? `expected ${clockTime(kernel.expected_start, new Date(now))}`
          : ''
      ].filter(Boolean);
      return `Waiting for GPUs${when.length ? ` (${when.join(', ')})` : ''}: ${why}`;
    }
    case 'starting':
      return `GPUs granted on ${kernel.nodes.join(',') || 'the node'}${job}: the kernel starts`;
    default:
      return kernel.message;
  }
}

/**
 * The toolbar item of one notebook. `fetch` and `pollSeconds` are the tests' to change.
 */
export class KernelWaitItem extends Widget {
  constructor(
    readonly context: IWaitingSession,
    readonly fetch: () => Promise<IKernels> = getKernels,
    readonly pollSeconds: number = WAIT_POLL_S
  ) {
    super();
    this.addClass('slurmlab-KernelWait');
    this.node.setAttribute('role', 'status');
    // a toolbar item's look, kept here with the item (one line, cut with an ellipsis; the title has it all)
    Object.assign(this.node.style, {
      alignSelf: 'center',
      padding: '0 6px',
      // shrinks (to its ellipsis) rather than run past the toolbar's end
      flex: '0 1 auto',
      minWidth: '0',
      maxWidth: '32em',
      overflow: 'hidden',
      whiteSpace: 'nowrap',
      textOverflow: 'ellipsis',
      fontSize: 'var(--jp-ui-font-size1)',
      color: 'var(--jp-warn-color0)'
    });
    this.hide();
    const wake = () => this.wake();
    context.statusChanged.connect(wake, this);
    context.connectionStatusChanged.connect(wake, this);
    context.kernelChanged.connect(wake, this);
    this.wake();
  }

  /** The kernel this item speaks of now (null: hidden). */
  get shown(): IKernelJob | null {
    return this._shown;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._stop();
    super.dispose();
  }

  /** Asks at once when the kernel is not running (and no asking is under way), then every poll interval. */
  wake(): void {
    if (this.isDisposed || this._timer !== null || this._asking) {
      return;
    }
    if (RUNNING_STATES.includes(this.context.kernelDisplayStatus)) {
      this._say(null);
      return;
    }
    void this.ask();
  }

  /** One round: the server's kernels, the item's words, the next round while the kernel is not running. */
  async ask(): Promise<void> {
    this._asking = true;
    let answer: IKernels | null = null;
    try {
      answer = await this.fetch();
    } catch (reason) {
      // the server's log says why; the item keeps what it said and asks again next round
      console.warn('slurmlab: kernels not read for the kernel status', reason);
    } finally {
      this._asking = false;
    }
    if (this.isDisposed) {
      return;
    }
    const running = RUNNING_STATES.includes(this.context.kernelDisplayStatus);
    const none = STOPPED_STATES.includes(this.context.kernelDisplayStatus);
    if (answer === null && none) {
      return; // no kernel starting, and no answer to say otherwise: not asked again until one starts
    }
    if (answer !== null) {
      const kernel = this.context.session?.kernel ?? null;
      const found = waitingKernel(answer.kernels, {
        path: this.context.path,
        kernelId: kernel?.id ?? null,
        kernelName: kernel?.name ?? this.context.kernelPreference.name ?? null
      });
      this._say(running ? null : found);
      // nothing to follow: a kernel that is none of slurmlab's, no kernel, or a dead one (a restart or a
      // change of kernel wakes the item again)
      const spec = kernel?.name ?? this.context.kernelPreference.name ?? null;
      const other = spec !== null && !answer.specs.some(s => s.name === spec);
      if (!found && (other || none)) {
        return;
      }
    }
    if (!running) {
      this._timer = setTimeout(() => {
        this._timer = null;
        this.wake();
      }, this.pollSeconds * 1000);
    }
  }

  private _say(kernel: IKernelJob | null): void {
    this._shown = kernel;
    if (kernel === null) {
      this.node.textContent = '';
      this.node.removeAttribute('title');
      delete this.node.dataset.phase;
      delete this.node.dataset.jobId;
      this.hide();
      return;
    }
    this.node.textContent = waitWords(kernel);
    this.node.title = kernel.message;
    this.node.dataset.phase = kernel.phase;
    if (kernel.job_id) {
      this.node.dataset.jobId = kernel.job_id;
    } else {
      delete this.node.dataset.jobId;
    }
    this.show();
  }

  private _stop(): void {
    if (this._timer !== null) {
      clearTimeout(this._timer);
      this._timer = null;
    }
  }

  private _shown: IKernelJob | null = null;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _asking = false;
}

/** The item in every notebook's toolbar, right of JupyterLab's kernel indicator. */
export function addKernelWait(panel: NotebookPanel): KernelWaitItem {
  const item = new KernelWaitItem(panel.sessionContext);
  if (
    !panel.toolbar.insertAfter('executionProgress', 'slurmlabKernelWait', item)
  ) {
    panel.toolbar.addItem('slurmlabKernelWait', item);
  }
  panel.disposed.connect(() => item.dispose());
  return item;
}

export const kernelWaitPlugin: JupyterFrontEndPlugin<void> = {
  id: 'slurmlab-lab:kernel-wait',
  description:
    "Why a notebook's kernel on a GPU node waits (its Slurm job pending), beside the kernel's status.",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    tracker.forEach(panel => addKernelWait(panel));
    tracker.widgetAdded.connect((_, panel) => addKernelWait(panel));
  }
};
