/**
 * The "this session" row (issue 29): when the Jupyter server itself runs in a Slurm job (JupyterHub's
 * batchspawner, Open OnDemand), the sidebar shows that job first — its node, its GPUs, the time left and the
 * walltime warnings of a notebook's allocation panel — and never offers to cancel it.
 */
import { Widget } from '@lumino/widgets';

import * as api from '../api';
import { renderSession, SlurmSidebar, sessionText } from '../sidebar';
import * as fx from './fixtures';
import { answerEachTest, MockedApi } from './sidebarmocks';

type Mocks = typeof import('./sidebarmocks');

jest.mock('@jupyterlab/apputils', () =>
  jest.requireActual<Mocks>('./sidebarmocks').mockApputils()
);
jest.mock('../api', () =>
  jest.requireActual<Mocks>('./sidebarmocks').mockSidebarApi()
);

const server = api as MockedApi;
const NOW = Date.parse('2026-12-04T10:00:00Z');

/** Job 14 on node1 with two H100, `left` seconds of its `limit` left at NOW. */
function sessionJob(left: number, limit = 7200): api.IJob {
  return fx.job('14', {
    name: 'jupyterhub-spawner',
    time_limit_s: limit,
    ends_at: new Date(NOW + left * 1000).toISOString(),
    gpus: [
      { node: 'node1', index: 0, type: 'h100', kind: 'gpu', count: 1 },
      { node: 'node1', index: 1, type: 'h100', kind: 'gpu', count: 1 }
    ]
  });
}

describe('sessionText', () => {
  it('names the job, its node, its GPUs and the time left', () => {
    const said = sessionText(sessionJob(72 * 60), NOW);
    expect(said.line).toBe(
      'this session: job 14 on node1, 2 × h100, 1 h 12 min left'
    );
    expect(said.warning).toBeNull();
  });

  it('warns as an allocation panel does: under a tenth of the limit, then five minutes', () => {
    const tenth = sessionText(sessionJob(10 * 60), NOW);
    expect(tenth.level).toBe('tenth');
    expect(tenth.warning).toBe(
      'Time running out: 10 minutes left (under 10 % of the 2 hours limit) — save your work soon; ' +
        'this session ends with it'
    );
    const almost = sessionText(sessionJob(4 * 60 + 30), NOW);
    expect(almost.level).toBe('five-minutes');
    expect(almost.line).toContain('4 min left');
    expect(almost.warning).toMatch(
      /^Time almost up: 4 minutes 30 seconds left — .*save your work now; this session ends with it$/
    );
  });
});

describe('renderSession', () => {
  it('shows the row with what becomes of the job, and no cancel button', () => {
    const node = document.createElement('div');
    renderSession(node, fx.session(sessionJob(72 * 60)), null, NOW);
    expect(node.hidden).toBe(false);
    expect(node.dataset.jobId).toBe('14');
    expect(node.querySelector('.slurmlab-SessionLine')?.textContent).toBe(
      'this session: job 14 on node1, 2 × h100, 1 h 12 min left'
    );
    expect(node.querySelector('.slurmlab-SessionWords')?.textContent).toContain(
      'slurmlab never cancels it'
    );
    expect(node.querySelector('button')).toBeNull();
  });

  it("takes the job's row of the latest listing over the server's one read of it", () => {
    const node = document.createElement('div');
    const extended = sessionJob(3 * 3600, 4 * 3600); // the time limit was raised since
    renderSession(node, fx.session(sessionJob(60)), extended, NOW);
    expect(node.querySelector('.slurmlab-SessionLine')?.textContent).toContain(
      '3 h 0 min left'
    );
    expect(node.querySelector('.slurmlab-SessionWarning')).toBeNull();
  });

  it('is hidden when the server runs in no job', () => {
    const node = document.createElement('div');
    renderSession(node, fx.noSession(), null, NOW);
    expect(node.hidden).toBe(true);
    expect(node.textContent).toBe('');
  });
});

describe('the sidebar of a server that runs in a job', () => {
  answerEachTest(server, NOW);

  it('shows the session first, asks for it once, and offers no cancel for it', async () => {
    const own = sessionJob(72 * 60);
    server.getSession.mockResolvedValue(fx.session(own));
    server.getQueue.mockResolvedValue(fx.queue(own, fx.job('7')));
    const sidebar = new SlurmSidebar();
    Widget.attach(sidebar, document.body);
    await jest.advanceTimersByTimeAsync(0);
    const row = sidebar.node.querySelector('.slurmlab-Session') as HTMLElement;
    expect(row.hidden).toBe(false);
    expect(row.querySelector('.slurmlab-SessionLine')?.textContent).toBe(
      'this session: job 14 on node1, 2 × h100, 1 h 12 min left'
    );
    // first: before the GPU map and the jobs
    const order = [...sidebar.node.children].map(c => c.className);
    expect(order.indexOf('slurmlab-Session')).toBeLessThan(
      order.indexOf('slurmlab-Map')
    );
    const jobRow = sidebar.node.querySelector('tr[data-job-id="14"]');
    expect(jobRow?.querySelector('.slurmlab-Cancel')).toBeNull();
    expect(jobRow?.textContent).toContain('this session');
    expect(
      sidebar.node.querySelector('tr[data-job-id="7"] .slurmlab-Cancel')
    ).not.toBeNull();
    await jest.advanceTimersByTimeAsync(3 * 5000);
    expect(server.getSession).toHaveBeenCalledTimes(1);
    sidebar.dispose();
  });

  it('has no session row for a sandbox picked in the picker (another Slurm)', async () => {
    server.getClusters.mockResolvedValue(fx.clusters(fx.OWN, fx.SANDBOX));
    sessionStorage.setItem('slurmlab-cluster', fx.SANDBOX.id);
    server.getSession.mockResolvedValue(fx.session(sessionJob(72 * 60)));
    server.getQueue.mockResolvedValue(fx.queue(fx.job('7')));
    const sidebar = new SlurmSidebar();
    Widget.attach(sidebar, document.body);
    await jest.advanceTimersByTimeAsync(0);
    const row = sidebar.node.querySelector('.slurmlab-Session') as HTMLElement;
    expect(row.hidden).toBe(true);
    expect(server.getSession).not.toHaveBeenCalled();
    sidebar.dispose();
    sessionStorage.clear();
  });
});
