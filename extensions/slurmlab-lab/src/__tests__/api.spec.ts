/**
 * api.ts, the only module that talks to the server: the URL of each route (with the chosen cluster), how
 * an answer is read and stamped with its age, and how every kind of failure becomes an ApiError whose
 * message the sidebar shows. The server is a stand-in for `fetch`, under JupyterLab's real
 * ServerConnection; its answers are the fixtures' (held to slurmlab/server/contract.py).
 */
import {
  ApiError,
  cancelJob,
  currentCluster,
  getClusters,
  getJob,
  getNodes,
  getQueue,
  getRecentJobs,
  getStatus,
  setCluster,
  withCluster
} from '../api';
import * as fx from './fixtures';

type Answer = {
  status?: number;
  body?: string;
  headers?: Record<string, string>;
};

const fetchMock = jest.fn<Promise<Response>, [Request]>();

function answer({ status = 200, body = '', headers = {} }: Answer): void {
  fetchMock.mockResolvedValueOnce(new Response(body, { status, headers }));
}

function asked(): Request {
  return fetchMock.mock.calls[fetchMock.mock.calls.length - 1][0];
}

/**
 * The path of the last request, with its query less the cache buster (a bare timestamp) that
 * ServerConnection appends to every `no-store` request.
 */
function askedPath(): string {
  const url = new URL(asked().url);
  const query = url.search
    .slice(1)
    .split('&')
    .filter(part => part && !/^\d+$/.test(part));
  return url.pathname + (query.length ? `?${query.join('&')}` : '');
}

beforeEach(() => {
  fetchMock.mockReset();
  globalThis.fetch = fetchMock as unknown as typeof fetch;
  setCluster(null);
});

describe('withCluster', () => {
  it('adds the chosen cluster as a query parameter, after one already there', () => {
    expect(withCluster('status', null)).toBe('status');
    expect(withCluster('status', 'sandbox-a')).toBe('status?cluster=sandbox-a');
    expect(withCluster('queue?scope=all', 'sandbox-a')).toBe(
      'queue?scope=all&cluster=sandbox-a'
    );
    expect(withCluster('nodes', 'a b&c=d')).toBe('nodes?cluster=a%20b%26c%3Dd');
  });

  it('uses the cluster chosen with setCluster', () => {
    setCluster('sandbox-dgx-h100');
    expect(currentCluster()).toBe('sandbox-dgx-h100');
    expect(withCluster('nodes')).toBe('nodes?cluster=sandbox-dgx-h100');
    setCluster(null);
    expect(withCluster('nodes')).toBe('nodes');
  });
});

describe('the routes', () => {
  it('asks each route of contract.py, the chosen cluster on all but clusters', async () => {
    setCluster('sandbox-dgx-h100');
    const calls: [() => Promise<unknown>, string, string][] = [
      [getClusters, 'GET', '/slurmlab/api/clusters'],
      [getStatus, 'GET', '/slurmlab/api/status?cluster=sandbox-dgx-h100'],
      [
        () => getQueue('all'),
        'GET',
        '/slurmlab/api/queue?scope=all&cluster=sandbox-dgx-h100'
      ],
      [getNodes, 'GET', '/slurmlab/api/nodes?cluster=sandbox-dgx-h100'],
      [
        () => getJob('12_3'),
        'GET',
        '/slurmlab/api/jobs/12_3?cluster=sandbox-dgx-h100'
      ],
      [
        () => cancelJob('12/../7'),
        'POST',
        '/slurmlab/api/jobs/12%2F..%2F7/cancel?cluster=sandbox-dgx-h100'
      ],
      [getRecentJobs, 'GET', '/slurmlab/api/recent?cluster=sandbox-dgx-h100']
    ];
    for (const [call, method, path] of calls) {
      answer({ body: '{}' });
      await call();
      expect([asked().method, askedPath()]).toEqual([method, path]);
    }
  });

  it("sends the lab's XSRF cookie with a cancel", async () => {
    document.cookie = '_xsrf=2|abc|def|123';
    answer({
      body: JSON.stringify({ job_id: '7', cancelled: true, user: 'alice' })
    });
    const done = await cancelJob('7');
    expect(done).toEqual({ job_id: '7', cancelled: true, user: 'alice' });
    expect(asked().headers.get('X-XSRFToken')).toBe('2|abc|def|123');
    expect(await asked().text()).toBe('{}');
    document.cookie = '_xsrf=; expires=Thu, 01 Jan 1970 00:00:00 GMT';
  });
});

describe('reading an answer', () => {
  it('returns the JSON body, stamped with when Slurm confirmed it and how long ago', async () => {
    const queue = fx.queue(fx.job('7'), fx.job('8', { state: 'PENDING' }));
    answer({
      body: JSON.stringify(queue),
      headers: {
        'X-Slurmlab-As-Of': '2026-12-04T10:00:00Z',
        Date: 'Fri, 04 Dec 2026 10:00:12 GMT'
      }
    });
    const got = await getQueue();
    expect(got.jobs.map(j => [j.job_id, j.state])).toEqual([
      ['7', 'RUNNING'],
      ['8', 'PENDING']
    ]);
    expect(got.as_of).toBe('2026-12-04T10:00:00Z');
    expect(got.age_s).toBe(12);
  });

  it('never reports a negative age when the clocks disagree', async () => {
    answer({
      body: JSON.stringify(fx.nodes()),
      headers: {
        'X-Slurmlab-As-Of': '2026-12-04T10:00:05Z',
        Date: 'Fri, 04 Dec 2026 10:00:00 GMT'
      }
    });
    expect((await getNodes()).age_s).toBe(0);
  });

  it('leaves an answer without the stamp as it came', async () => {
    answer({ body: JSON.stringify(fx.status()) });
    const got = await getStatus();
    expect(got).toEqual(fx.status());
    expect('as_of' in got).toBe(false);
  });
});

describe('a failure is an ApiError with a message to show', () => {
  async function failure(call: () => Promise<unknown>): Promise<ApiError> {
    try {
      await call();
    } catch (error) {
      expect(error).toBeInstanceOf(ApiError);
      return error as ApiError;
    }
    throw new Error('the call did not fail');
  }

  it("the server's own error body", async () => {
    answer({
      status: 400,
      body: JSON.stringify({
        message: 'unknown cluster gone; known: default',
        reason: 'Bad Request'
      })
    });
    const error = await failure(getStatus);
    expect([error.status, error.message]).toEqual([
      400,
      'unknown cluster gone; known: default'
    ]);
  });

  it('an error body with a reason only', async () => {
    answer({
      status: 403,
      body: JSON.stringify({ message: '', reason: 'not your job' })
    });
    expect((await failure(() => cancelJob('9'))).message).toBe('not your job');
  });

  it('a page that is not JSON (a proxy in front of the lab)', async () => {
    answer({ status: 502, body: '<html>Bad Gateway</html>' });
    const error = await failure(getNodes);
    expect([error.status, error.message]).toEqual([
      502,
      '<html>Bad Gateway</html>'
    ]);
  });

  it('an empty body: the HTTP status in words', async () => {
    answer({ status: 503, body: '' });
    const error = await failure(getQueue);
    expect(error.status).toBe(503);
    expect(error.message).toMatch(/^503\b/);
  });

  it('no answer at all: status 0, saying the Jupyter server cannot be reached', async () => {
    fetchMock.mockRejectedValueOnce(new TypeError('Failed to fetch'));
    const error = await failure(getClusters);
    expect(error.status).toBe(0);
    expect(error.message).toContain('cannot reach the Jupyter server');
    expect(error.message).toContain('Failed to fetch');
  });
});
