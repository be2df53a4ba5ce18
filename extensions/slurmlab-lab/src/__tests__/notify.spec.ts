/**
 * notify.ts: which of my jobs started or ended between two queue answers (issue 28: no notification when
 * a job starts or ends).
 */
import { eventMessage, JobWatcher } from '../notify';
import * as fx from './fixtures';

describe('JobWatcher', () => {
  it('says nothing about the jobs of the first answer', () => {
    const watcher = new JobWatcher();
    expect(watcher.update('default', [fx.job('7')])).toEqual([]);
  });

  it('tells a start when a pending job of mine runs, and an end when it leaves the queue', () => {
    const watcher = new JobWatcher();
    const pending = fx.job('7', { state: 'PENDING', nodes: null });
    watcher.update('default', [pending]);
    expect(watcher.update('default', [pending])).toEqual([]);
    const running = fx.job('7', { nodes: 'node2' });
    const started = watcher.update('default', [running]);
    expect(started.map(e => [e.kind, e.job.job_id])).toEqual([
      ['started', '7']
    ]);
    expect(eventMessage(started[0])).toBe(
      'Slurm job 7 (train-7) started on node2'
    );
    expect(watcher.update('default', [running])).toEqual([]);
    const ended = watcher.update('default', []);
    expect(ended.map(e => [e.kind, e.job.job_id])).toEqual([['ended', '7']]);
    expect(eventMessage(ended[0])).toMatch(/^Slurm job 7 \(train-7\) ended/);
  });

  it('tells a job that started between two answers, and an end once, however long it is completing', () => {
    const watcher = new JobWatcher();
    watcher.update('default', []);
    expect(watcher.update('default', [fx.job('8')]).map(e => e.kind)).toEqual([
      'started'
    ]);
    const completing = fx.job('8', { state: 'COMPLETING' });
    expect(watcher.update('default', [completing]).map(e => e.kind)).toEqual([
      'ended'
    ]);
    expect(watcher.update('default', [completing])).toEqual([]);
    expect(watcher.update('default', [])).toEqual([]);
  });

  it("ignores other users' jobs, and starts afresh for another cluster", () => {
    const watcher = new JobWatcher();
    watcher.update('default', [fx.job('9', { mine: false, state: 'PENDING' })]);
    expect(watcher.update('default', [fx.job('9', { mine: false })])).toEqual(
      []
    );
    watcher.update('default', [fx.job('10')]);
    // the sidebar now shows a sandbox: its running jobs did not just start, job 10 did not just end
    expect(watcher.update('sandbox-x', [fx.job('3')])).toEqual([]);
  });
});
