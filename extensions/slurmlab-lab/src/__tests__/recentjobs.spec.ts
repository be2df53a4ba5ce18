/**
 * recentjobs.ts: the "Recent jobs" section, its words and colours per end state, and its slow cadence
 * (once a minute, or at once for another cluster).
 */
import * as api from '../api';
import {
  RECENT_REFRESH_S,
  RecentJobsSection,
  elapsedText,
  renderRecent,
  stateFamily
} from '../recentjobs';
import * as fx from './fixtures';
import type { MockedApi } from './sidebarmocks';

type Mocks = typeof import('./sidebarmocks');

jest.mock('@jupyterlab/apputils', () =>
  jest.requireActual<Mocks>('./sidebarmocks').mockApputils()
);
jest.mock('../api', () =>
  jest.requireActual<Mocks>('./sidebarmocks').mockApi('getRecentJobs')
);

const server = api as MockedApi;

describe('stateFamily', () => {
  it.each([
    ['COMPLETED', 'ok'],
    ['RUNNING', 'running'],
    ['COMPLETING', 'running'],
    ['PENDING', 'waiting'],
    ['REQUEUED', 'waiting'],
    ['TIMEOUT', 'stopped'],
    ['OUT_OF_MEMORY', 'stopped'],
    ['PREEMPTED', 'stopped'],
    ['CANCELLED', 'cancelled'],
    ['FAILED', 'failed'],
    ['NODE_FAIL', 'failed'],
    ['BOOT_FAIL', 'failed']
  ])('%s is %s', (state, family) => {
    expect(stateFamily(state)).toBe(family);
  });
});

describe('elapsedText', () => {
  it('is how long it ran against its limit', () => {
    expect(elapsedText(fx.recentJob('7'))).toBe('00:10:02 of 00:10:00');
    expect(elapsedText(fx.recentJob('7', { time_limit_s: null }))).toBe(
      '00:10:02'
    );
  });
});

describe('renderRecent', () => {
  it('draws one row per job, its state coloured by family and said in words', () => {
    const into = document.createElement('div');
    renderRecent(
      into,
      fx.recent(
        fx.recentJob('7', {
          state: 'TIMEOUT',
          state_words: 'ran out of time',
          exit_code: 0,
          signal: 15,
          gpus: 2,
          efficiency: 'Efficiency of job 7: GPUs busy 41% of the time'
        }),
        fx.recentJob('8', { exit_code: 0 })
      )
    );
    const rows = Array.from(
      into.querySelectorAll<HTMLElement>('.slurmlab-RecentJob')
    );
    expect(rows.map(r => [r.dataset.jobId, r.dataset.family])).toEqual([
      ['7', 'stopped'],
      ['8', 'ok']
    ]);
    expect(rows[0].querySelector('.slurmlab-RecentWords')?.textContent).toBe(
      'ran out of time · 00:10:02 of 00:10:00 · 2 GPUs · exit 0 (signal 15)'
    );
    expect(
      rows[0].querySelector('.slurmlab-RecentEfficiency')?.textContent
    ).toBe('GPUs busy 41% of the time');
    expect(rows[1].querySelector('.slurmlab-RecentWords')?.textContent).toBe(
      'completed · 00:10:02 of 00:10:00 · 1 GPU'
    );
  });

  it("says so when accounting is off, and when the user's day was empty", () => {
    const into = document.createElement('div');
    renderRecent(into, {
      ...fx.recent(),
      accounting: false,
      message: 'Slurm accounting is off: start the sandbox with accounting'
    });
    const line = into.querySelector<HTMLElement>('.slurmlab-RecentMessage');
    expect(line?.dataset.accounting).toBe('false');
    renderRecent(into, fx.recent());
    expect(into.textContent).toBe('no ended jobs of alice in the last 24 h');
  });
});

describe('RecentJobsSection', () => {
  beforeEach(() => {
    jest.useFakeTimers();
    server.getRecentJobs.mockReset();
    server.getRecentJobs.mockResolvedValue(fx.recent(fx.recentJob('7')));
  });

  afterEach(() => {
    jest.useRealTimers();
  });

  it('asks at most once a minute for one cluster, and at once for another', async () => {
    const section = new RecentJobsSection();
    await section.refresh(null);
    await section.refresh(null);
    expect(server.getRecentJobs).toHaveBeenCalledTimes(1);
    expect(section.node.querySelector('[data-job-id="7"]')).not.toBeNull();
    await section.refresh('sandbox-a');
    expect(server.getRecentJobs).toHaveBeenCalledTimes(2);
    jest.advanceTimersByTime(RECENT_REFRESH_S * 1000 + 1);
    await section.refresh('sandbox-a');
    expect(server.getRecentJobs).toHaveBeenCalledTimes(3);
    await section.refresh('sandbox-a', true);
    expect(server.getRecentJobs).toHaveBeenCalledTimes(4);
  });

  it("shows the server's error in place of the list", async () => {
    server.getRecentJobs.mockRejectedValue(
      new api.ApiError(500, 'sacct timed out after 10 s')
    );
    const section = new RecentJobsSection();
    await section.refresh(null);
    expect(
      section.node.querySelector('.slurmlab-RecentMessage')?.textContent
    ).toBe('sacct timed out after 10 s');
  });
});

describe('recent jobs are the ended ones (issue 28: they repeated the running jobs)', () => {
  it('leaves out a job accounting says runs or pends, and any job in the queue now', () => {
    const into = document.createElement('div');
    renderRecent(
      into,
      fx.recent(
        fx.recentJob('9', { state: 'RUNNING', state_words: 'running' }),
        fx.recentJob('8', { state: 'PENDING', state_words: 'pending' }),
        fx.recentJob('7', { state: 'COMPLETED' }),
        fx.recentJob('6', { state: 'FAILED', state_words: 'failed' })
      ),
      new Set(['7'])
    );
    expect(
      Array.from(into.querySelectorAll<HTMLElement>('.slurmlab-RecentJob')).map(
        r => r.dataset.jobId
      )
    ).toEqual(['6']);
  });
});
