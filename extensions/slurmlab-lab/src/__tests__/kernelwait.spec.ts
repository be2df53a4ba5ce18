/**
 * Issue 30 point 2: while a kernel's Slurm job pends, the notebook's toolbar says why beside JupyterLab's
 * kernel indicator ("Waiting for GPUs (job <id>, expected <time>): <why>"), found by the notebook's path while the
 * start is unanswered (no kernel id yet) and by its kernel id after; the item goes once the kernel runs,
 * and a notebook whose kernel is none of slurmlab's is asked about once, not followed.
 */
import { Signal } from '@lumino/signaling';

import * as api from '../api';
import {
  KernelWaitItem,
  IWaitingSession,
  waitingKernel,
  waitWords
} from '../kernelwait';

// JupyterLab's packages as far as the modules use them (their ES modules load only in a browser)
jest.mock('@jupyterlab/apputils', () => ({
  Dialog: {},
  showDialog: jest.fn(),
  Notification: { success: jest.fn(), info: jest.fn(), warning: jest.fn() }
}));
jest.mock('@jupyterlab/notebook', () => ({ INotebookTracker: {} }));
jest.mock('../api', () => ({ getKernels: jest.fn() }));

const NOW = new Date(2026, 11, 4, 10, 0).getTime();
const EXPECTED = new Date(2026, 11, 4, 10, 42).toISOString();
const WHY = 'the GPUs it asks for are all in use';

function kernel(overrides: Partial<api.IKernelJob> = {}): api.IKernelJob {
  return {
    kernel_id: 'k-1',
    kernel_name: 'slurmlab-gpu',
    notebook: 'work/train.ipynb',
    phase: 'pending',
    job_id: '41',
    message: `job 41 is pending: ${WHY}`,
    reason: 'Resources',
    why: WHY,
    expected_start: EXPECTED,
    nodes: [],
    gpus: [],
    step: null,
    request: '2 GPUs for 10 min',
    ends_at: null,
    ...overrides
  };
}

function answer(kernels: api.IKernelJob[]): api.IKernels {
  return {
    stamp: 0,
    kernels,
    specs: [
      { name: 'slurmlab-gpu', display_name: 'Python 3 (slurmlab: GPU node)' }
    ],
    words: ''
  } as unknown as api.IKernels;
}

/** A notebook's session context as the item reads it: no kernel yet (its start unanswered). */
class FakeSession implements IWaitingSession {
  path = 'work/train.ipynb';
  kernelDisplayStatus = 'initializing';
  session: { kernel: { id: string; name: string } | null } | null = null;
  kernelPreference: { name?: string } = { name: 'slurmlab-gpu' };
  statusChanged = new Signal<any, any>(this);
  connectionStatusChanged = new Signal<any, any>(this);
  kernelChanged = new Signal<any, any>(this);

  becomes(status: string, kernel?: { id: string; name: string }): void {
    this.kernelDisplayStatus = status;
    if (kernel) {
      this.session = { kernel };
    }
    this.statusChanged.emit(status);
  }
}

describe('waitWords', () => {
  it('says why the job waits and when Slurm expects it to start', () => {
    expect(waitWords(kernel(), NOW)).toBe(
      `Waiting for GPUs (job 41, expected 10:42): ${WHY}`
    );
  });

  it('leaves the expected start out until Slurm has one, and falls back on its reason', () => {
    expect(waitWords(kernel({ expected_start: null, why: '' }), NOW)).toBe(
      'Waiting for GPUs (job 41): Resources'
    );
  });

  it('says the request is checked, then that the kernel starts on its node', () => {
    expect(waitWords(kernel({ phase: 'checking', job_id: null }), NOW)).toBe(
      'Checking the GPU request: 2 GPUs for 10 min'
    );
    expect(
      waitWords(kernel({ phase: 'starting', nodes: ['node2'] }), NOW)
    ).toBe('GPUs granted on node2 (job 41): the kernel starts');
  });
});

describe('waitingKernel', () => {
  const unanswered = {
    path: 'work/train.ipynb',
    kernelId: null,
    kernelName: 'slurmlab-gpu'
  };

  it("finds the notebook's kernel by its path while the start is unanswered", () => {
    const mine = kernel();
    const other = kernel({ kernel_id: 'k-2', notebook: 'other.ipynb' });
    expect(waitingKernel([other, mine], unanswered)).toBe(mine);
    expect(
      waitingKernel([mine], { ...unanswered, path: 'RTC:work/train.ipynb' })
    ).toBe(mine);
  });

  it('finds nothing for another notebook, another kernel spec, or a kernel that runs', () => {
    expect(
      waitingKernel([kernel({ notebook: 'other.ipynb' })], unanswered)
    ).toBeNull();
    expect(
      waitingKernel([kernel({ kernel_name: 'slurmlab-cpu' })], unanswered)
    ).toBeNull();
    expect(
      waitingKernel([kernel({ phase: 'running' })], unanswered)
    ).toBeNull();
    expect(
      waitingKernel([kernel({ phase: 'refused' })], unanswered)
    ).toBeNull();
  });

  it('finds the kernel by its id once the notebook knows it (a restart waiting for a new job)', () => {
    const restarted = kernel({ kernel_id: 'k-9', notebook: null });
    expect(waitingKernel([restarted], { ...unanswered, kernelId: 'k-9' })).toBe(
      restarted
    );
  });
});

describe('KernelWaitItem', () => {
  const server = api as jest.Mocked<typeof api>;

  beforeEach(() => {
    jest.useFakeTimers({ now: NOW });
    server.getKernels.mockReset();
  });

  afterEach(() => {
    jest.useRealTimers();
  });

  it('shows why the kernel waits, follows it, and goes once the kernel runs', async () => {
    const context = new FakeSession();
    const fetch = jest
      .fn<Promise<api.IKernels>, []>()
      .mockResolvedValueOnce(
        answer([kernel({ phase: 'checking', job_id: null })])
      )
      .mockResolvedValueOnce(answer([kernel()]))
      .mockResolvedValueOnce(
        answer([kernel({ phase: 'starting', nodes: ['node1'] })])
      )
      .mockResolvedValue(answer([kernel({ phase: 'running' })]));
    const item = new KernelWaitItem(context, fetch, 2);
    await jest.advanceTimersByTimeAsync(0);
    expect(item.isHidden).toBe(false);
    expect(item.node.dataset.phase).toBe('checking');

    await jest.advanceTimersByTimeAsync(2000);
    expect(item.node.textContent).toBe(
      `Waiting for GPUs (job 41, expected 10:42): ${WHY}`
    );
    expect(item.node.dataset.phase).toBe('pending');
    expect(item.node.dataset.jobId).toBe('41');
    expect(item.node.title).toBe(`job 41 is pending: ${WHY}`);

    await jest.advanceTimersByTimeAsync(2000);
    expect(item.node.dataset.phase).toBe('starting');

    // the start answered, the kernel idle: nothing to say, nothing more asked
    context.becomes('idle', { id: 'k-1', name: 'slurmlab-gpu' });
    await jest.advanceTimersByTimeAsync(2000);
    expect(item.isHidden).toBe(true);
    expect(item.node.textContent).toBe('');
    const asked = fetch.mock.calls.length;
    await jest.advanceTimersByTimeAsync(20_000);
    expect(fetch.mock.calls.length).toBe(asked);
    item.dispose();
  });

  it('asks again when a restart waits for a new job, by the kernel id', async () => {
    const context = new FakeSession();
    context.kernelDisplayStatus = 'idle';
    context.session = { kernel: { id: 'k-1', name: 'slurmlab-gpu' } };
    const fetch = jest
      .fn<Promise<api.IKernels>, []>()
      .mockResolvedValue(answer([kernel({ notebook: null, job_id: '77' })]));
    const item = new KernelWaitItem(context, fetch, 2);
    await jest.advanceTimersByTimeAsync(10_000);
    expect(fetch).not.toHaveBeenCalled();
    expect(item.isHidden).toBe(true);

    context.becomes('restarting');
    await jest.advanceTimersByTimeAsync(0);
    expect(item.node.textContent).toBe(
      `Waiting for GPUs (job 77, expected 10:42): ${WHY}`
    );
    item.dispose();
  });

  it("asks once for a kernel that is none of slurmlab's, and says nothing", async () => {
    const context = new FakeSession();
    context.kernelPreference = { name: 'python3' };
    const fetch = jest
      .fn<Promise<api.IKernels>, []>()
      .mockResolvedValue(answer([kernel({ notebook: 'other.ipynb' })]));
    const item = new KernelWaitItem(context, fetch, 2);
    await jest.advanceTimersByTimeAsync(20_000);
    expect(fetch).toHaveBeenCalledTimes(1);
    expect(item.isHidden).toBe(true);
    item.dispose();
  });

  it('does not follow a notebook with no kernel, whether the server answers or not', async () => {
    jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    const context = new FakeSession();
    context.kernelDisplayStatus = 'unknown';
    context.kernelPreference = {};
    const fetch = jest
      .fn<Promise<api.IKernels>, []>()
      .mockRejectedValue(new Error('404'));
    const item = new KernelWaitItem(context, fetch, 2);
    await jest.advanceTimersByTimeAsync(20_000);
    expect(fetch).toHaveBeenCalledTimes(1);
    expect(item.isHidden).toBe(true);
    item.dispose();
  });

  it('keeps what it said when the server does not answer, and asks again', async () => {
    jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    const context = new FakeSession();
    const fetch = jest
      .fn<Promise<api.IKernels>, []>()
      .mockResolvedValueOnce(answer([kernel()]))
      .mockRejectedValueOnce(new Error('502'))
      .mockResolvedValue(answer([kernel({ why: 'still queued' })]));
    const item = new KernelWaitItem(context, fetch, 2);
    await jest.advanceTimersByTimeAsync(0);
    await jest.advanceTimersByTimeAsync(2000);
    expect(item.node.dataset.phase).toBe('pending');
    expect(item.node.textContent).toContain(WHY);
    await jest.advanceTimersByTimeAsync(2000);
    expect(item.node.textContent).toContain('still queued');
    item.dispose();
    const asked = fetch.mock.calls.length;
    await jest.advanceTimersByTimeAsync(10_000);
    expect(fetch.mock.calls.length).toBe(asked);
  });
});
