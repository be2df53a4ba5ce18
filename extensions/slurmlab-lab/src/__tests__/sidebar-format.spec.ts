/**
 * The sidebar's words for times and GPUs (sidebar.ts): the one duration formatter, as
 * slurmlab.core.slurm.timefmt.format_duration writes durations, the countdowns, and a job's GPUs.
 */
import {
  clockTime,
  formatSeconds,
  gpuSummary,
  pollFrequency,
  secondsSince,
  secondsUntil
} from '../sidebar';
import * as fx from './fixtures';

type Mocks = typeof import('./sidebarmocks');

jest.mock('@jupyterlab/apputils', () =>
  jest.requireActual<Mocks>('./sidebarmocks').mockApputils()
);

describe('formatSeconds', () => {
  it.each([
    [0, '00:00:00'],
    [59.9, '00:00:59'],
    [3600, '01:00:00'],
    [86399, '23:59:59'],
    [86400, '1-00:00:00'],
    [2 * 86400 + 3 * 3600 + 4 * 60 + 5, '2-03:04:05'],
    [-1, 'unlimited'],
    [null, '—']
  ])('%s s -> %s', (seconds, text) => {
    expect(formatSeconds(seconds)).toBe(text);
  });
});

describe('secondsUntil and secondsSince', () => {
  const now = Date.parse('2026-12-04T10:00:00Z');

  it('count to and from an ISO time, never below zero', () => {
    expect(secondsUntil('2026-12-04T10:01:30Z', now)).toBe(90);
    expect(secondsUntil('2026-12-04T09:00:00Z', now)).toBe(0);
    expect(secondsSince('2026-12-04T09:59:00Z', now)).toBe(60);
    expect(secondsSince('2026-12-04T10:05:00Z', now)).toBe(0);
  });

  it('have nothing to say without a time, or about one they cannot read', () => {
    expect(secondsUntil(null, now)).toBeNull();
    expect(secondsSince('Unknown', now)).toBeNull();
  });
});

describe('clockTime', () => {
  it("is the hour today, and the day too on another day (the browser's time zone)", () => {
    const now = new Date(2026, 11, 4, 9, 0);
    expect(clockTime(new Date(2026, 11, 4, 14, 5).toISOString(), now)).toBe(
      '14:05'
    );
    expect(clockTime(new Date(2026, 11, 5, 8, 30).toISOString(), now)).toBe(
      'Dec 5 08:30'
    );
  });
});

describe('gpuSummary', () => {
  it('groups the GPUs per node, with their types', () => {
    const job = fx.job('7', {
      gpus: [
        { node: 'node1', index: 4, type: 'h100', kind: 'gpu', count: 1 },
        { node: 'node1', index: 6, type: 'h100', kind: 'gpu', count: 1 },
        { node: 'node2', index: 3, type: null, kind: 'shard', count: 4 },
        { node: 'node3', index: null, type: 'a100', kind: 'gpu', count: 1 }
      ]
    });
    expect(gpuSummary(job)).toBe(
      'node1: 4,6 · node2: 3 shard×4 · node3: ? (h100, a100)'
    );
  });

  it('falls back to the gres string, or a dash', () => {
    expect(gpuSummary(fx.job('7', { gpus: [], gres: 'gpu:2' }))).toBe('gpu:2');
    expect(gpuSummary(fx.job('7', { gpus: [], gres: null }))).toBe('—');
  });
});

describe('pollFrequency', () => {
  it('is the interval in ms, with a backoff that may wait longer than a short interval', () => {
    expect(pollFrequency(5)).toEqual({
      interval: 5000,
      backoff: true,
      max: 30_000
    });
    expect(pollFrequency(0)).toEqual({
      interval: 1000,
      backoff: true,
      max: 30_000
    });
    expect(pollFrequency(3600)).toEqual({
      interval: 3_600_000,
      backoff: true,
      max: 3_600_000
    });
  });
});
