/**
 * gpumap.ts and gpucanvas.ts: the GPU map's cells (who holds each GPU, in colour and in words), its
 * legend, and the canvas a large cluster is drawn on instead.
 */
import { IJob } from '../api';
import {
  gpuColumns,
  IMapContext,
  LEGEND_JOBS,
  migShort,
  renderLegend,
  renderMap
} from '../gpumap';
import { JobPalette } from '../palette';
import * as fx from './fixtures';

function context(...jobs: IJob[]): IMapContext {
  return {
    palette: new JobPalette(),
    jobs: new Map(jobs.map(j => [j.job_id, j]))
  };
}

function cells(target: HTMLElement, nodeName: string): HTMLElement[] {
  return Array.from(
    target.querySelectorAll<HTMLElement>(
      `[data-node="${nodeName}"] .slurmlab-Gpu`
    )
  );
}

describe('migShort', () => {
  it("keeps a MIG profile's compute part", () => {
    expect(migShort('1g.18gb')).toBe('1g');
    expect(migShort('3g.71gb')).toBe('3g');
    expect(migShort('h100')).toBe('h100');
    expect(migShort(null)).toBe('mig');
  });
});

describe('renderMap', () => {
  const mine = fx.job('7', { name: 'train' });
  const theirs = fx.job('8', { mine: false, user: 'bob', name: 'sweep' });
  const nodes = [
    fx.node('node1', [
      fx.gpu(0, { jobs: ['7'], whole: true }),
      fx.gpu(1, { jobs: ['99'], whole: true }),
      fx.gpu(2),
      fx.gpu(3, { jobs: ['8'], shards_used: 2, shards_total: 8 })
    ]),
    fx.node(
      'node2',
      [
        fx.gpu(0, { type: '1g.18gb', mig: true }),
        fx.gpu(1, { type: '3g.71gb', mig: true })
      ],
      'DOWN*'
    )
  ];

  it("draws each GPU's state, Slurm's index and its jobs", () => {
    const target = document.createElement('div');
    renderMap(target, nodes, context(mine, theirs));
    expect(
      cells(target, 'node1').map(c => [
        c.dataset.gpu,
        c.dataset.state,
        c.dataset.jobs
      ])
    ).toEqual([
      ['0', 'job', '7'],
      ['1', 'other', '99'],
      ['2', 'free', ''],
      ['3', 'job', '8']
    ]);
    expect(cells(target, 'node2').map(c => c.dataset.state)).toEqual([
      'down',
      'down'
    ]);
  });

  it('says who holds each GPU in its title', () => {
    const target = document.createElement('div');
    renderMap(target, nodes, context(mine, theirs));
    const [held, other, free, shared] = cells(target, 'node1').map(
      c => c.title
    );
    expect(held).toBe('node1 GPU 0 (h100) · job 7 train');
    expect(other).toBe("node1 GPU 1 (h100) · another user's job 99");
    expect(free).toBe('node1 GPU 2 (h100) · free');
    expect(shared).toBe('node1 GPU 3 (h100) · job 8 sweep of bob · shards 2/8');
    expect(cells(target, 'node2')[0].title).toBe(
      'node2 GPU 0 (MIG slice 1g.18gb) · free, but the node is down*'
    );
  });

  it("colours a job's GPU as its legend entry, and fills a shared GPU to its share", () => {
    const ctx = context(mine, theirs);
    const target = document.createElement('div');
    renderMap(target, nodes, ctx);
    const [held, , free, shared] = cells(target, 'node1');
    expect(held.style.background).not.toBe('');
    expect(held.dataset.state).toBe('job');
    expect(free.style.background).toBe('');
    expect(shared.querySelector('.slurmlab-Shards')?.textContent).toBe('2/8');
    // (its fill, a gradient, is beyond jsdom's CSS: tests/browser/test_lab_sidebar.py sees it drawn)
    const legend = document.createElement('div');
    renderLegend(legend, renderMap(target, nodes, ctx), ctx);
    const entry = legend.querySelector<HTMLElement>(
      '[data-job-id="7"] .slurmlab-LegendSwatch'
    );
    expect(entry?.style.background).toBe(held.style.background);
  });

  it('reports what it drew for the legend', () => {
    const seen = renderMap(
      document.createElement('div'),
      nodes,
      context(mine, theirs)
    );
    expect(seen).toEqual({
      jobs: ['7', '8'],
      other: true,
      down: true,
      mig: true,
      shared: true
    });
  });

  it('says so when Slurm lists no nodes', () => {
    const target = document.createElement('div');
    renderMap(target, [], context());
    expect(target.textContent).toBe('no nodes');
  });

  it('draws a large cluster on a canvas, summed up in a line', () => {
    // jsdom draws nothing (no canvas package): the line and the canvas's data say it all
    jest.spyOn(HTMLCanvasElement.prototype, 'getContext').mockReturnValue(null);
    const target = document.createElement('div');
    const seen = renderMap(target, nodes, context(mine, theirs), 4);
    expect(target.querySelectorAll('.slurmlab-Gpu').length).toBe(0);
    const canvas = target.querySelector<HTMLCanvasElement>(
      'canvas.slurmlab-GpuCanvas'
    );
    expect(canvas?.dataset).toMatchObject({ nodes: '2', gpus: '6', used: '3' });
    expect(target.querySelector('.slurmlab-MapSummary')?.textContent).toContain(
      '2 nodes · 6 GPUs · 3 in use · 3 free · 1 node down or drained'
    );
    expect(seen.jobs).toEqual(['7', '8']);
  });
});

describe('renderLegend', () => {
  it('lists the kinds of cells that appeared, then the jobs', () => {
    const ctx = context(fx.job('7', { name: 'train' }));
    const legend = document.createElement('div');
    renderLegend(
      legend,
      { jobs: ['7'], other: false, down: false, mig: true, shared: false },
      ctx
    );
    expect(
      Array.from(legend.querySelectorAll<HTMLElement>('[data-legend]')).map(
        i => i.dataset.legend
      )
    ).toEqual(['free', 'other', 'down', 'mig', 'job']);
    expect(legend.querySelector('[data-job-id="7"]')?.textContent).toBe(
      '7 train'
    );
  });

  it('names the first jobs and counts the rest', () => {
    const ids = Array.from({ length: LEGEND_JOBS + 3 }, (_, i) =>
      String(100 + i)
    );
    const ctx = context(...ids.map(id => fx.job(id)));
    const legend = document.createElement('div');
    renderLegend(
      legend,
      { jobs: ids, other: false, down: false, mig: false, shared: false },
      ctx
    );
    expect(legend.querySelectorAll('[data-job-id]').length).toBe(LEGEND_JOBS);
    expect(legend.querySelector('.slurmlab-LegendMore')?.textContent).toBe(
      'and 3 more jobs'
    );
  });
});

describe('the lines of GPU cells (issue 28: 8 GPUs wrapped as 7+1, node names cut)', () => {
  it('keeps 8 GPUs on one line and splits more into even lines', () => {
    expect([1, 4, 7, 8, 10, 16, 24].map(gpuColumns)).toEqual([
      1, 4, 7, 8, 5, 8, 8
    ]);
  });

  it('gives every node row its number of columns and a name column as wide as the longest name', () => {
    const target = document.createElement('div');
    const eight = Array.from({ length: 8 }, (_, i) => fx.gpu(i));
    renderMap(
      target,
      [
        fx.node('dgx-h100-n1', eight),
        fx.node('n2', [
          ...eight,
          ...eight.map(g => ({ ...g, index: g.index + 8 }))
        ])
      ],
      context()
    );
    const grids = Array.from(
      target.querySelectorAll<HTMLElement>('.slurmlab-GpuCells')
    ).map(g => g.style.getPropertyValue('--slurmlab-gpu-columns'));
    expect(grids).toEqual(['8', '8']);
    expect(target.style.getPropertyValue('--slurmlab-node-label')).toBe('12ch');
    const name = target.querySelector<HTMLElement>('.slurmlab-NodeName');
    expect(name?.title).toBe('dgx-h100-n1');
  });
});
