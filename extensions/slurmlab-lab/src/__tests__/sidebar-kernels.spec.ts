/**
 * "kernels on GPU nodes" (issue 30 point 4): the sidebar shows each kernel this server started inside a Slurm
 * job (slurmlab's kernel provisioner) with its notebook, job, state, why it waits and its time left, never a
 * cancel button for the kernel's job (the kernel owns it), and a button per slurmlab kernel spec that opens a
 * new notebook with it.
 */
import { Widget } from '@lumino/widgets';

import * as api from '../api';
import { kernelState, renderKernels } from '../kernelsview';
import { SlurmSidebar } from '../sidebar';
import * as fx from './fixtures';
import { answerEachTest, MockedApi } from './sidebarmocks';

type Mocks = typeof import('./sidebarmocks');

jest.mock('@jupyterlab/apputils', () =>
  jest.requireActual<Mocks>('./sidebarmocks').mockApputils()
);
jest.mock('../api', () =>
  jest.requireActual<Mocks>('./sidebarmocks').mockSidebarApi('getKernels')
);

const server = api as MockedApi;
const NOW = Date.parse('2026-12-04T10:00:00Z');
const WORDS =
  'the kernel owns its job: shutting the kernel down (Kernel > Shut Down Kernel) releases it; a restart keeps it (a new step)';

function kernel(overrides: Partial<api.IKernelJob> = {}): api.IKernelJob {
  return {
    kernel_id: 'k-1',
    kernel_name: 'slurmlab-gpu',
    notebook: 'train.ipynb',
    phase: 'running',
    job_id: '41',
    message: 'job 41 running: the kernel answers',
    reason: null,
    why: '',
    expected_start: null,
    nodes: ['node1'],
    gpus: [{ node: 'node1', indices: [2] }],
    step: '41.0',
    request: '1 GPU, 60 min',
    ends_at: new Date(NOW + 72 * 60 * 1000).toISOString(),
    ...overrides
  };
}

const PENDING = kernel({
  kernel_id: 'k-2',
  notebook: 'waits.ipynb',
  phase: 'pending',
  job_id: '42',
  reason: 'Resources',
  why: 'waiting for resources: the GPUs/CPUs asked for are in use by other jobs',
  expected_start: '2026-12-04T11:30:00Z',
  message: 'job 42 is pending: waiting for resources',
  nodes: [],
  gpus: [],
  step: null,
  ends_at: null
});

function answer(
  kernels: api.IKernelJob[],
  specs: api.IKernelSpec[] = []
): api.IKernels {
  return { kernels, specs, words: WORDS };
}

describe('kernelState', () => {
  it("says a running kernel's job, GPUs, step and time left", () => {
    expect(kernelState(kernel(), NOW)).toBe(
      'job 41 running on node1 GPU 2 (step 41.0), 1 h 12 min left'
    );
  });

  it('says why a pending kernel waits and when Slurm expects it to start', () => {
    const said = kernelState(PENDING, NOW);
    expect(said).toMatch(
      /^job 42 pending: waiting for resources: the GPUs\/CPUs asked for are in use by other jobs; Slurm expects it to start at \d\d:\d\d$/
    );
  });

  it("shows the provisioner's sentence once the job ended", () => {
    const ended = kernel({
      phase: 'ended',
      message: 'job 41 ended (TIMEOUT): the kernel ended with it'
    });
    expect(kernelState(ended, NOW)).toBe(
      'job 41 ended (TIMEOUT): the kernel ended with it'
    );
  });
});

describe('renderKernels', () => {
  it('lists each kernel with its notebook and state, and offers no cancel for its job', () => {
    const list = document.createElement('div');
    const buttons = document.createElement('div');
    renderKernels(list, buttons, answer([kernel(), PENDING]), null, NOW);
    const rows = [
      ...list.querySelectorAll('.slurmlab-KernelRow')
    ] as HTMLElement[];
    expect(rows.map(r => r.dataset.jobId)).toEqual(['41', '42']);
    expect(rows.map(r => r.dataset.phase)).toEqual(['running', 'pending']);
    expect(rows[0].querySelector('.slurmlab-KernelName')?.textContent).toBe(
      'train.ipynb'
    );
    expect(
      rows[1].querySelector('.slurmlab-KernelState')?.textContent
    ).toContain('waiting for resources');
    expect(list.querySelector('button')).toBeNull();
    expect(list.querySelector('.slurmlab-KernelsWords')?.textContent).toBe(
      WORDS
    );
  });

  it('offers one button per slurmlab kernel spec, which opens a notebook with it', () => {
    const list = document.createElement('div');
    const buttons = document.createElement('div');
    const start = jest.fn();
    renderKernels(
      list,
      buttons,
      answer(
        [],
        [{ name: 'slurmlab-gpu', display_name: 'Python 3 (slurmlab: 1 GPU)' }]
      ),
      start,
      NOW
    );
    expect(list.textContent).toBe(
      'no kernel of this server runs in a Slurm job'
    );
    const button = buttons.querySelector('button') as HTMLButtonElement;
    expect(button.textContent).toBe('New notebook: Python 3 (slurmlab: 1 GPU)');
    button.click();
    expect(start).toHaveBeenCalledWith('slurmlab-gpu');
  });
});

describe("the sidebar's kernels section", () => {
  answerEachTest(server, NOW);

  it("shows the server's kernels every round, and offers no cancel for a kernel's job", async () => {
    server.getKernels.mockResolvedValue(answer([PENDING]));
    server.getQueue.mockResolvedValue(
      fx.queue(fx.job('42', { state: 'PENDING' }), fx.job('7'))
    );
    const sidebar = new SlurmSidebar();
    const start = jest.fn();
    sidebar.kernels.start = start;
    Widget.attach(sidebar, document.body);
    await jest.advanceTimersByTimeAsync(0);
    const section = sidebar.node.querySelector(
      '.slurmlab-Kernels'
    ) as HTMLElement;
    expect(section.hidden).toBe(false);
    expect(section.querySelector('h3')?.textContent).toBe(
      'kernels on GPU nodes'
    );
    expect(
      section.querySelector('.slurmlab-KernelRow')?.getAttribute('data-phase')
    ).toBe('pending');
    server.getKernels.mockResolvedValue(
      answer(
        [kernel({ kernel_id: 'k-2', job_id: '42', notebook: 'waits.ipynb' })],
        [{ name: 'slurmlab-gpu', display_name: 'GPU node' }]
      )
    );
    await jest.advanceTimersByTimeAsync(5000);
    expect(
      section.querySelector('.slurmlab-KernelRow')?.getAttribute('data-phase')
    ).toBe('running');
    (
      section.querySelector('.slurmlab-KernelStart') as HTMLButtonElement
    ).click();
    expect(start).toHaveBeenCalledWith('slurmlab-gpu');
    expect(section.querySelector('.slurmlab-Cancel')).toBeNull();
    const jobRow = sidebar.node.querySelector(
      'tr.slurmlab-Job[data-job-id="42"]'
    ) as HTMLElement;
    expect(jobRow.dataset.kernel).toBe('true');
    expect(jobRow.querySelector('.slurmlab-Cancel')).toBeNull();
    expect(jobRow.textContent).toContain('shut the kernel down to release it');
    expect(
      sidebar.node.querySelector('tr[data-job-id="7"] .slurmlab-Cancel')
    ).not.toBeNull();
    sidebar.dispose();
  });

  it('is left out when the server has no kernels route', async () => {
    server.getKernels.mockRejectedValue(new api.ApiError(404, 'Not Found'));
    server.getQueue.mockResolvedValue(fx.queue(fx.job('7')));
    const sidebar = new SlurmSidebar();
    Widget.attach(sidebar, document.body);
    await jest.advanceTimersByTimeAsync(0);
    expect(
      (sidebar.node.querySelector('.slurmlab-Kernels') as HTMLElement).hidden
    ).toBe(true);
    sidebar.dispose();
  });
});
