/**
 * The stand-ins the specs share (this file holds no tests: jest's testRegex takes `*.spec.ts` only). A jsdom
 * cannot load JupyterLab's apputils (ES modules for a browser), and no spec may reach the server through
 * api.ts (the only module that talks to it), so each spec mocks both with these. jest hoists `jest.mock`
 * above the imports, where an imported name is not yet bound: a factory takes this module itself,
 *
 *   jest.mock('../api', () =>
 *     jest.requireActual<Mocks>('./sidebarmocks').mockApi('getRecentJobs')
 *   );
 *
 * with `type Mocks = typeof import('./sidebarmocks')` (a type, which the hoisting lets through).
 */
import type * as api from '../api';
import * as fx from './fixtures';

/** api.ts's error as the specs throw it: a status and a message, nothing read from a response. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
  }
}

/** What the sidebar asks api.ts for in a round, and when a job is cancelled or a cluster picked. */
export const SIDEBAR_ROUTES = [
  'setCluster',
  'cancelJob',
  'getClusters',
  'getStatus',
  'getNodes',
  'getQueue',
  'getRecentJobs',
  'getSession'
];

/** api.ts with ApiError and a bare `jest.fn()` for each of `routes`; nothing else. */
export function mockApi(...routes: string[]): Record<string, unknown> {
  const mocked: Record<string, unknown> = { ApiError };
  for (const route of routes) {
    mocked[route] = jest.fn();
  }
  return mocked;
}

/** api.ts as the sidebar uses it, and `more` routes besides (a section of its own, as the kernels'). */
export function mockSidebarApi(...more: string[]): Record<string, unknown> {
  return mockApi(...SIDEBAR_ROUTES, ...more);
}

/** JupyterLab's apputils as far as the sidebar uses them: a dialog never shown, notifications recorded. */
export function mockApputils(): Record<string, unknown> {
  return {
    Dialog: {},
    showDialog: jest.fn(),
    Notification: { success: jest.fn(), info: jest.fn(), warning: jest.fn() }
  };
}

export type MockedApi = jest.Mocked<typeof api>;

/**
 * A round's answers from the server of fixtures.ts: its clusters and status, node1 with two idle GPUs, no
 * recent jobs and no session. The queue is each spec's own; a spec sets any other answer after this one.
 */
export function answerRounds(server: MockedApi): void {
  server.getClusters.mockResolvedValue(fx.clusters());
  server.getStatus.mockResolvedValue(fx.status());
  server.getNodes.mockResolvedValue(
    fx.nodes(fx.node('node1', [fx.gpu(0), fx.gpu(1)]))
  );
  server.getRecentJobs.mockResolvedValue(fx.recent());
  server.getSession.mockResolvedValue(fx.noSession());
}

/**
 * In a describe: before each test, jest's clock stopped at `now`, the mocks' calls forgotten and
 * answerRounds' answers set; after it, the real clock again.
 */
export function answerEachTest(server: MockedApi, now: number): void {
  beforeEach(() => {
    jest.useFakeTimers({ now });
    jest.clearAllMocks();
    answerRounds(server);
  });

  afterEach(() => {
    jest.useRealTimers();
  });
}

/** Moves jest's fake clock on by `ms` and runs what falls due, promises included. */
export async function wait(ms: number): Promise<void> {
  await jest.advanceTimersByTimeAsync(ms);
}
