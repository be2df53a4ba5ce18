/**
 * queueview.ts: the main-area queue (issue 28: no main-area queue view with hold/release). Which buttons a
 * job gets, and what a click asks the server.
 */
import { Widget } from '@lumino/widgets';

import * as api from '../api';
import { jobActions, QueuePanel } from '../queueview';
import * as fx from './fixtures';
import type { MockedApi } from './sidebarmocks';

type Mocks = typeof import('./sidebarmocks');

jest.mock('@jupyterlab/apputils', () => ({
  Dialog: {
    cancelButton: jest.fn(() => ({})),
    warnButton: jest.fn(() => ({}))
  },
  showDialog: jest.fn(() => Promise.resolve({ button: { accept: true } }))
}));

jest.mock('../api', () => ({
  ...jest
    .requireActual<Mocks>('./sidebarmocks')
    .mockApi('cancelJob', 'getQueue', 'getSession', 'holdOrRelease'),
  currentCluster: jest.fn(() => null)
}));

const server = api as MockedApi;

describe('jobActions', () => {
  it('offers hold on a pending job, release on a held one, cancel on any of mine', () => {
    expect(jobActions(fx.job('1'))).toEqual(['cancel']);
    expect(
      jobActions(fx.job('2', { state: 'PENDING', reason: 'Resources' }))
    ).toEqual(['hold', 'cancel']);
    expect(
      jobActions(fx.job('3', { state: 'PENDING', reason: 'JobHeldUser' }))
    ).toEqual(['release', 'cancel']);
    // an administrator's hold is not the user's to lift
    expect(
      jobActions(fx.job('4', { state: 'PENDING', reason: 'JobHeldAdmin' }))
    ).toEqual(['cancel']);
    expect(jobActions(fx.job('5', { mine: false, state: 'PENDING' }))).toEqual(
      []
    );
  });

  it('offers nothing on the job this Jupyter server runs in', () => {
    expect(jobActions(fx.job('14'), '14')).toEqual([]);
    expect(jobActions(fx.job('15'), '14')).toEqual(['cancel']);
  });
});

describe('QueuePanel', () => {
  let panel: QueuePanel;

  beforeEach(() => {
    jest.clearAllMocks();
    server.getQueue.mockResolvedValue(
      fx.queue(
        fx.job('11', { state: 'PENDING', reason: 'Priority' }),
        fx.job('12', { state: 'PENDING', reason: 'JobHeldUser' }),
        fx.job('13', { mine: false, user: 'bob' })
      )
    );
    server.getSession.mockResolvedValue(fx.noSession());
    server.holdOrRelease.mockResolvedValue({
      job_id: '11',
      action: 'hold',
      done: true,
      user: 'alice'
    });
    panel = new QueuePanel(5);
    Widget.attach(panel, document.body);
  });

  afterEach(() => panel.dispose());

  async function rows(): Promise<HTMLElement[]> {
    await panel.refresh();
    return Array.from(panel.node.querySelectorAll('tr.slurmlab-QueueJob'));
  }

  it("lists the jobs with their buttons, none on another user's job", async () => {
    const found = await rows();
    expect(found.map(r => r.dataset.jobId)).toEqual(['11', '12', '13']);
    const buttons = found.map(r =>
      Array.from(r.querySelectorAll('button')).map(b => b.dataset.action)
    );
    expect(buttons).toEqual([['hold', 'cancel'], ['release', 'cancel'], []]);
  });

  it('offers no button on the job this Jupyter server runs in, asked of the server once', async () => {
    server.getSession.mockResolvedValue(fx.session(fx.job('12')));
    const panelInJob = new QueuePanel(5);
    Widget.attach(panelInJob, document.body);
    await panelInJob.refresh();
    await panelInJob.refresh();
    const found = Array.from(
      panelInJob.node.querySelectorAll('tr.slurmlab-QueueJob')
    ) as HTMLElement[];
    const buttons = found.map(r => r.querySelectorAll('button').length);
    expect(buttons).toEqual([2, 0, 0]);
    expect(server.getSession).toHaveBeenCalledTimes(2); // once per panel: this one and the one of beforeEach
    panelInJob.dispose();
  });

  it('holds and releases through the server, then asks for the queue again', async () => {
    const found = await rows();
    const asked = server.getQueue.mock.calls.length;
    (found[0].querySelector('[data-action="hold"]') as HTMLElement).click();
    await new Promise(r => setTimeout(r, 0));
    await panel.refresh();
    expect(server.holdOrRelease).toHaveBeenCalledWith('11', 'hold');
    (found[1].querySelector('[data-action="release"]') as HTMLElement).click();
    await new Promise(r => setTimeout(r, 0));
    expect(server.holdOrRelease).toHaveBeenCalledWith('12', 'release');
    expect(server.getQueue.mock.calls.length).toBeGreaterThan(asked);
  });

  it("says why when the server refuses (another user's job, a job that started)", async () => {
    const found = await rows();
    server.holdOrRelease.mockRejectedValueOnce(
      new api.ApiError(
        409,
        'job 11 is RUNNING: only a pending job can be held or released'
      )
    );
    (found[0].querySelector('[data-action="hold"]') as HTMLElement).click();
    await new Promise(r => setTimeout(r, 0));
    const error = panel.node.querySelector('.slurmlab-Error') as HTMLElement;
    expect(error.hidden).toBe(false);
    expect(error.textContent).toContain('Hold of job 11 failed');
    expect(error.textContent).toContain('only a pending job');
  });
});
