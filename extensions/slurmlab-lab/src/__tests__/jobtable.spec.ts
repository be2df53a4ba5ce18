/**
 * jobtable.ts: every row up to VIRTUAL_OVER jobs; past that only the rows in view, with spacers that
 * keep the scroll bar the whole list's.
 */
import type { IJob } from '../api';
import { el } from '../dom';
import { JobTable, VIRTUAL_OVER } from '../jobtable';
import * as fx from './fixtures';

function table(): JobTable {
  return new JobTable(
    () => el('tr', 'head'),
    (job: IJob) => [el('tr', 'row', job.job_id)]
  );
}

function jobs(count: number): IJob[] {
  return Array.from({ length: count }, (_, i) => fx.job(String(1000 + i)));
}

describe('JobTable', () => {
  it('builds every row of a short list', () => {
    const t = table();
    t.render(jobs(VIRTUAL_OVER));
    expect(t.node.dataset.virtual).toBe('false');
    expect(t.node.querySelectorAll('tr.row').length).toBe(VIRTUAL_OVER);
    expect(t.node.querySelectorAll('.slurmlab-JobSpacer').length).toBe(0);
  });

  it('builds only the rows in view of a long one, spacers standing for the rest', () => {
    const t = table();
    t.render(jobs(10_000));
    expect(t.node.dataset).toMatchObject({ virtual: 'true', jobs: '10000' });
    const rows = t.node.querySelectorAll('tr.row');
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.length).toBeLessThan(100);
    expect(rows[0].textContent).toBe('1000');
    const [top, bottom] = Array.from(
      t.node.querySelectorAll<HTMLElement>('.slurmlab-JobSpacer')
    );
    expect(top.style.height).toBe('0px');
    expect(parseFloat(bottom.style.height)).toBeGreaterThan(9000 * 30);
  });

  it('builds the rows at the place a new answer is read at', () => {
    const t = table();
    t.render(jobs(10_000), 34 * 5000);
    const first = Number(t.node.querySelector('tr.row')?.textContent);
    expect(first).toBeGreaterThan(1000 + 4900);
    expect(first).toBeLessThanOrEqual(1000 + 5000);
  });
});
