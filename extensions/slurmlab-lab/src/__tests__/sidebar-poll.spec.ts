/**
 * When the sidebar asks the server: at once when it is shown, then every refresh interval while it is
 * shown and the browser tab is in sight; less and less often while the server does not answer; at once
 * on a click, a pick, or a new interval. The server's answers are the fixtures', through a stand-in for
 * api.ts (the only module that talks to the server), on jest's clock.
 */
import { Widget } from '@lumino/widgets';

import * as api from '../api';
import {
  DEFAULT_REFRESH_S,
  isStale,
  SlurmSidebar,
  statusText
} from '../sidebar';
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
const INTERVAL_MS = DEFAULT_REFRESH_S * 1000;

/** Rounds the sidebar started: each asks for the clusters first. */
function rounds(): number {
  return server.getClusters.mock.calls.length;
}

function setTabHidden(hidden: boolean): void {
  Object.defineProperty(document, 'visibilityState', {
    configurable: true,
    get: () => (hidden ? 'hidden' : 'visible')
  });
  Object.defineProperty(document, 'hidden', {
    configurable: true,
    get: () => hidden
  });
  document.dispatchEvent(new Event('visibilitychange'));
}

let sidebar: SlurmSidebar;

beforeEach(() => {
  jest.useFakeTimers();
  // Lumino's backoff draws each wait between the interval and three times the last: halfway, always
  jest.spyOn(Math, 'random').mockReturnValue(0.5);
  jest.clearAllMocks();
  setTabHidden(false);
  answerRounds(server);
  server.getNodes.mockResolvedValue(
    fx.nodes(fx.node('node1', [fx.gpu(0, { jobs: ['7'], whole: true })]))
  );
  server.getQueue.mockResolvedValue(fx.queue(fx.job('7')));
  sidebar = new SlurmSidebar();
  sidebar.refreshInterval = DEFAULT_REFRESH_S;
});

afterEach(() => {
  sidebar.dispose();
  jest.restoreAllMocks();
  jest.useRealTimers();
});

describe('the sidebar polls the server', () => {
  it('asks at once when shown, then once per interval', async () => {
    Widget.attach(sidebar, document.body);
    await wait(0);
    expect(rounds()).toBe(1);
    expect(
      sidebar.node.querySelector('.slurmlab-Gpu')?.getAttribute('data-jobs')
    ).toBe('7');
    await wait(INTERVAL_MS);
    expect(rounds()).toBe(2);
    await wait(3 * INTERVAL_MS);
    expect(rounds()).toBe(5);
  });

  it('stands by while the browser tab is hidden, and comes back when it shows', async () => {
    Widget.attach(sidebar, document.body);
    await wait(0);
    setTabHidden(true);
    const before = rounds();
    await wait(10 * INTERVAL_MS);
    // Lumino's poll lingers one tick before it stands by
    expect(rounds() - before).toBeLessThanOrEqual(1);
    const hidden = rounds();
    setTabHidden(false);
    await wait(INTERVAL_MS);
    expect(rounds()).toBe(hidden + 1);
  });

  it('does not ask while the sidebar panel is collapsed, and asks at once when it opens', async () => {
    Widget.attach(sidebar, document.body);
    await wait(0);
    sidebar.hide();
    const before = rounds();
    await wait(10 * INTERVAL_MS);
    expect(rounds()).toBe(before);
    sidebar.show();
    await wait(0);
    expect(rounds()).toBe(before + 1);
  });

  it('waits longer and longer while the server does not answer, and says why', async () => {
    server.getClusters.mockRejectedValue(
      new api.ApiError(
        0,
        'cannot reach the Jupyter server: TypeError: Failed to fetch'
      )
    );
    Widget.attach(sidebar, document.body);
    const asked: number[] = [];
    for (let t = 0; t <= 120_000; t += 250) {
      const before = rounds();
      await wait(250);
      if (rounds() > before) {
        asked.push(t);
      }
    }
    // every 5 s would be 24 requests in two minutes
    expect(asked.length).toBeLessThan(10);
    const gaps = asked.slice(1).map((t, i) => t - asked[i]);
    expect(gaps[gaps.length - 1]).toBeGreaterThan(3 * INTERVAL_MS);
    const error = sidebar.node.querySelector('.slurmlab-Error') as HTMLElement;
    expect(error.hidden).toBe(false);
    expect(error.textContent).toContain('cannot reach the Jupyter server');

    // the server answers again: the error goes, and the sidebar is back to its interval
    server.getClusters.mockResolvedValue(fx.clusters());
    await wait(30_000);
    expect(error.hidden).toBe(true);
    const back = rounds();
    await wait(2 * INTERVAL_MS);
    expect(rounds()).toBe(back + 2);
  });

  it('keeps its interval while the controller is down (the server still answers)', async () => {
    server.getStatus.mockResolvedValue(fx.status(false));
    Widget.attach(sidebar, document.body);
    await wait(0);
    await wait(4 * INTERVAL_MS);
    expect(rounds()).toBe(5);
    const error = sidebar.node.querySelector('.slurmlab-Error') as HTMLElement;
    expect(error.textContent).toContain('slurmctld does not answer');
  });

  it('asks at once on a click, and once more after a round that a click interrupts', async () => {
    Widget.attach(sidebar, document.body);
    await wait(0);
    await wait(INTERVAL_MS / 2);
    const button = sidebar.node.querySelector(
      '.slurmlab-Refresh'
    ) as HTMLButtonElement;
    button.click();
    await wait(0);
    expect(rounds()).toBe(2);

    // a round that hangs on the queue; two clicks meanwhile make one more round, not two
    let answer: (q: api.IQueue) => void = () => undefined;
    server.getQueue.mockImplementationOnce(
      () => new Promise(resolve => (answer = resolve))
    );
    button.click();
    await wait(0);
    expect(rounds()).toBe(3);
    button.click();
    button.click();
    await wait(0);
    expect(rounds()).toBe(3);
    answer(fx.queue());
    await wait(0);
    expect(rounds()).toBe(4);
  });

  it('follows a new refresh interval from the settings', async () => {
    Widget.attach(sidebar, document.body);
    await wait(0);
    sidebar.refreshInterval = 20;
    await wait(0);
    const start = rounds();
    await wait(60_000);
    // one round for the change, then every 20 s; not every 5 s
    expect(rounds() - start).toBeLessThanOrEqual(4);
    expect(rounds() - start).toBeGreaterThanOrEqual(3);
  });

  it('stops asking once disposed', async () => {
    Widget.attach(sidebar, document.body);
    await wait(0);
    sidebar.dispose();
    const before = rounds();
    await wait(10 * INTERVAL_MS);
    expect(rounds()).toBe(before);
  });

  it('asks nothing once the sidebar is closed, and at once when it is opened again', async () => {
    Widget.attach(sidebar, document.body);
    await wait(0);
    Widget.detach(sidebar);
    const before = rounds();
    await wait(10 * INTERVAL_MS);
    expect(rounds()).toBe(before);
    Widget.attach(sidebar, document.body);
    await wait(0);
    expect(rounds()).toBe(before + 1);
  });
});

describe("the status line follows the server's two cadences", () => {
  const status = fx.status(); // my jobs every 20 s, the whole cluster every 60 s

  it('names both intervals', () => {
    expect(statusText(status)).toContain(
      'my jobs every 20s, cluster every 60s'
    );
  });

  it('calls data stale only past two intervals of the listing it comes from', () => {
    // "all jobs" comes from the whole-cluster listing: 70 s old is on time there, not for my jobs
    expect(isStale(status, 70, true)).toBe(false);
    expect(isStale(status, 70, false)).toBe(true);
    expect(isStale(status, 130, true)).toBe(true);
    expect(statusText(status, 70, true)).not.toContain('old');
    expect(statusText(status, 70, false)).toContain('old');
  });

  it("says when Slurm's rate limit stretches the polls, and not otherwise", () => {
    const slow =
      "Slurm is rate-limiting this user's queries: updates come every 120 s";
    expect(statusText({ ...status, slow })).toContain(slow);
    expect(statusText(status)).not.toContain('rate-limiting');
  });

  it('reads a server that names one interval only', () => {
    const older = {
      ...status,
      cluster_poll_interval_s: undefined
    } as unknown as typeof status;
    expect(statusText(older)).toContain('every 20s');
    expect(isStale(older, 50, true)).toBe(true);
  });
});
