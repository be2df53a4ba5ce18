/**
 * The sidebar's notifications (issue 28): a JupyterLab notification when one of my jobs starts or ends, taken
 * from the queue answers the sidebar asks for anyway — the same four requests a round as before, and none to
 * Slurm — and the recent jobs that follow the queue: asked again at once when one of my jobs ends, without
 * the running ones.
 */
import { Notification } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import * as api from '../api';
import { DEFAULT_REFRESH_S, SlurmSidebar } from '../sidebar';
import * as fx from './fixtures';
import { answerRounds, MockedApi, wait } from './sidebarmocks';

type Mocks = typeof import('./sidebarmocks');

jest.mock('@jupyterlab/apputils', () =>
  jest.requireActual<Mocks>('./sidebarmocks').mockApputils()
);
jest.mock('../api', () =>
  jest.requireActual<Mocks>('./sidebarmocks').mockSidebarApi()
);

const server = api as MockedApi;
const notes = Notification as jest.Mocked<typeof Notification>;
const INTERVAL_MS = DEFAULT_REFRESH_S * 1000;

/** Requests to the server per route so far. */
function requests(): Record<string, number> {
  return {
    clusters: server.getClusters.mock.calls.length,
    status: server.getStatus.mock.calls.length,
    nodes: server.getNodes.mock.calls.length,
    queue: server.getQueue.mock.calls.length,
    recent: server.getRecentJobs.mock.calls.length
  };
}

let sidebar: SlurmSidebar;

beforeEach(() => {
  jest.useFakeTimers();
  jest.clearAllMocks();
  answerRounds(server);
  server.getQueue.mockResolvedValue(
    fx.queue(fx.job('7', { state: 'PENDING', nodes: null, gpus: [] }))
  );
  server.getRecentJobs.mockResolvedValue(
    fx.recent(
      fx.recentJob('7', { state: 'PENDING', state_words: 'pending' }),
      fx.recentJob('5', { state: 'COMPLETED' })
    )
  );
  sidebar = new SlurmSidebar();
  sidebar.refreshInterval = DEFAULT_REFRESH_S;
});

afterEach(() => {
  sidebar.dispose();
  jest.useRealTimers();
});

function recentIds(): string[] {
  return Array.from(
    sidebar.node.querySelectorAll<HTMLElement>('.slurmlab-RecentJob')
  ).map(r => r.dataset.jobId as string);
}

it('notifies when my job starts and when it ends, with no request more per round', async () => {
  Widget.attach(sidebar, document.body);
  await wait(0);
  expect(notes.success).not.toHaveBeenCalled();
  const first = requests();
  // the job starts
  server.getQueue.mockResolvedValue(fx.queue(fx.job('7')));
  await wait(INTERVAL_MS);
  expect(notes.success).toHaveBeenCalledTimes(1);
  expect(notes.success.mock.calls[0][0]).toBe(
    'Slurm job 7 (train-7) started on node1'
  );
  // it ends: gone from the queue
  server.getQueue.mockResolvedValue(fx.queue());
  server.getRecentJobs.mockResolvedValue(
    fx.recent(
      fx.recentJob('7', { state: 'COMPLETED' }),
      fx.recentJob('5', { state: 'COMPLETED' })
    )
  );
  await wait(INTERVAL_MS);
  expect(notes.info).toHaveBeenCalledTimes(1);
  expect(notes.info.mock.calls[0][0]).toMatch(/^Slurm job 7 \(train-7\) ended/);
  // one request to each of the four routes a round, as before the notifications
  const now = requests();
  for (const route of ['clusters', 'status', 'nodes', 'queue']) {
    expect(now[route] - first[route]).toBe(2);
  }
});

it('shows only ended jobs under Recent jobs, and asks again at once when one of mine ends', async () => {
  server.getQueue.mockResolvedValue(fx.queue(fx.job('7')));
  server.getRecentJobs.mockResolvedValue(
    fx.recent(
      fx.recentJob('7', { state: 'RUNNING', state_words: 'running' }),
      fx.recentJob('5', { state: 'COMPLETED' })
    )
  );
  Widget.attach(sidebar, document.body);
  await wait(0);
  // job 7 runs: it is in the job list, not repeated under Recent jobs
  expect(recentIds()).toEqual(['5']);
  const asked = server.getRecentJobs.mock.calls.length;
  await wait(INTERVAL_MS);
  await wait(INTERVAL_MS);
  await wait(INTERVAL_MS);
  // nothing changed: still the slow cadence
  expect(server.getRecentJobs.mock.calls.length).toBe(asked);
  server.getQueue.mockResolvedValue(fx.queue());
  server.getRecentJobs.mockResolvedValue(
    fx.recent(
      fx.recentJob('7', { state: 'FAILED', state_words: 'failed' }),
      fx.recentJob('5', { state: 'COMPLETED' })
    )
  );
  await wait(INTERVAL_MS);
  // not a minute later: the round that saw it leave the queue
  expect(server.getRecentJobs.mock.calls.length).toBe(asked + 1);
  expect(recentIds()).toEqual(['7', '5']);
});
