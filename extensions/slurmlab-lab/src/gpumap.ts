/**
 * The GPU map (one row per node, one numbered cell per GPU or MIG slice) and its legend.
 *
 * A cell is coloured by the job that holds it when that job is in the job list below the map; a GPU
 * held by a job that is not (another user's, in "my jobs") is grey and hatched; the free GPUs of a node
 * that is down or drained are crossed out. Every cell carries `data-gpu` (Slurm's GPU index on the node),
 * `data-jobs` and `data-state` (free | job | other | down), and a title that says all of it in words.
 *
 * A map of more than LARGE_MAP_GPUS GPUs (a real cluster: 1,000 nodes x 8) is drawn on one canvas instead
 * (gpucanvas.ts): tens of thousands of DOM cells would stall the page at every refresh.
 */
import { IGpuSlot, IJob, INode } from './api';
import { el } from './dom';
import { LARGE_MAP_GPUS, renderCanvasMap } from './gpucanvas';
import { JobPalette, nodeIsDown, textOn } from './palette';

export interface IMapContext {
  palette: JobPalette;
  /** The jobs of the job list, by id: these get colours, any other job on a GPU is another user's. */
  jobs: Map<string, IJob>;
}

/** What the map showed, for its legend: the listed jobs on it, and which kinds of cells appeared. */
export interface IMapSeen {
  jobs: string[];
  other: boolean;
  down: boolean;
  mig: boolean;
  shared: boolean;
}

/** The most GPU cells on one line: 8 (a DGX) stays one line, 16 are two lines of 8, never 7+1. */
export const GPUS_PER_LINE = 8;
/** The widest node name column (characters); a longer name ends in an ellipsis, whole in its title. */
export const NODE_NAME_CHARS = 14;

/** How many cells a line of a node's GPUs holds: all of them up to GPUS_PER_LINE, else an even split. */
export function gpuColumns(count: number): number {
  if (count <= GPUS_PER_LINE) {
    return Math.max(1, count);
  }
  return Math.ceil(count / Math.ceil(count / GPUS_PER_LINE));
}

/** The most jobs the legend lists by name. */
export const LEGEND_JOBS = 64;

/** "1g.18gb" -> "1g": the compute part of a MIG profile, short enough for a cell. */
export function migShort(type: string | null): string {
  if (!type) {
    return 'mig';
  }
  const m = /(\d+g)\./.exec(type);
  return m ? m[1] : type;
}

function jobWords(jobId: string, ctx: IMapContext): string {
  const job = ctx.jobs.get(jobId);
  if (!job) {
    return `another user's job ${jobId}`;
  }
  const owner = job.mine ? '' : ` of ${job.user || '?'}`;
  return `job ${job.display_id} ${job.name}${owner}`;
}

/** How a GPU shows: free | job (a listed job holds it) | other (another job) | down, and the listed jobs. */
export function cellState(
  gpu: IGpuSlot,
  ctx: IMapContext,
  down: boolean,
  seen: IMapSeen
): { state: string; listed: string[]; busy: boolean } {
  const listed = gpu.jobs.filter(j => ctx.jobs.has(j));
  const busy = gpu.whole || gpu.shards_used > 0 || gpu.jobs.length > 0;
  const state = busy
    ? listed.length
      ? 'job'
      : 'other'
    : down
      ? 'down'
      : 'free';
  seen.other ||= state === 'other';
  seen.down ||= state === 'down';
  seen.mig ||= gpu.mig;
  seen.shared ||= gpu.shards_total > 0 && gpu.shards_used > 0 && !gpu.whole;
  for (const id of listed) {
    if (!seen.jobs.includes(id)) {
      seen.jobs.push(id);
    }
  }
  return { state, listed, busy };
}

/** A GPU in words: the node, the index, its kind, who holds it, its shards. */
export function cellTitle(
  node: INode,
  gpu: IGpuSlot,
  ctx: IMapContext,
  down: boolean,
  busy: boolean
): string {
  const what = gpu.mig ? `MIG slice ${gpu.type || '?'}` : gpu.type || 'gpu';
  const who = gpu.jobs.length
    ? gpu.jobs.map(j => jobWords(j, ctx)).join(', ')
    : busy
      ? 'in use'
      : down
        ? `free, but the node is ${node.state.toLowerCase()}`
        : 'free';
  const shards = gpu.shards_total
    ? ` · shards ${gpu.shards_used}/${gpu.shards_total}`
    : '';
  return `${node.name} GPU ${gpu.index} (${what}) · ${who}${shards}`;
}

function gpuCell(
  node: INode,
  gpu: IGpuSlot,
  ctx: IMapContext,
  down: boolean,
  seen: IMapSeen
): HTMLElement {
  const cell = el('div', 'slurmlab-Gpu');
  cell.dataset.gpu = String(gpu.index);
  cell.dataset.jobs = gpu.jobs.join(',');
  cell.appendChild(el('span', 'slurmlab-GpuIndex', String(gpu.index)));
  if (gpu.mig) {
    cell.classList.add('slurmlab-mod-mig');
    cell.appendChild(el('span', 'slurmlab-MigSlice', migShort(gpu.type)));
  }
  const { state, listed, busy } = cellState(gpu, ctx, down, seen);
  cell.dataset.state = state;
  cell.classList.add(`slurmlab-mod-${state}`);
  const colour = listed.length ? ctx.palette.colour(listed[0]) : null;
  if (gpu.shards_total > 0 && gpu.shards_used > 0 && !gpu.whole) {
    // A shared GPU: the filled part shows the fraction of its shards in use.
    const pct = Math.round((100 * gpu.shards_used) / gpu.shards_total);
    const fill = colour || 'var(--jp-border-color1)';
    cell.style.background = `linear-gradient(to top, ${fill} ${pct}%, transparent ${pct}%)`;
    cell.appendChild(
      el('span', 'slurmlab-Shards', `${gpu.shards_used}/${gpu.shards_total}`)
    );
  } else if (colour) {
    cell.style.background = colour;
    cell.style.color = textOn(colour);
  }
  cell.title = cellTitle(node, gpu, ctx, down, busy);
  return cell;
}

/** Draw the map into `target`; what it showed, for the legend. Past `canvasAbove` GPUs on a canvas. */
export function renderMap(
  target: HTMLElement,
  nodes: INode[],
  ctx: IMapContext,
  canvasAbove: number = LARGE_MAP_GPUS
): IMapSeen {
  const seen: IMapSeen = {
    jobs: [],
    other: false,
    down: false,
    mig: false,
    shared: false
  };
  target.replaceChildren();
  if (!nodes.length) {
    target.appendChild(el('div', 'slurmlab-Empty', 'no nodes'));
    return seen;
  }
  if (nodes.reduce((n, node) => n + node.gpus.length, 0) > canvasAbove) {
    renderCanvasMap(target, nodes, ctx, seen);
    seen.jobs.sort((a, b) => a.length - b.length || a.localeCompare(b));
    return seen;
  }
  // one width for every node's name, that of the longest (up to NODE_NAME_CHARS): the cells line up and
  // a name such as "dgx-h100-n12" is not cut to "dgx-h…" as a fixed width cut it
  const longest = Math.max(...nodes.map(n => n.name.length));
  target.style.setProperty(
    '--slurmlab-node-label',
    `${Math.min(longest, NODE_NAME_CHARS) + 1}ch`
  );
  for (const node of nodes) {
    const down = nodeIsDown(node.state);
    const row = el('div', 'slurmlab-NodeRow');
    row.dataset.node = node.name;
    row.classList.toggle('slurmlab-mod-down', down);
    // name and state stacked, so that the GPU cells keep the width of a narrow sidebar
    const label = el('div', 'slurmlab-NodeLabel');
    const nodeName = el('div', 'slurmlab-NodeName', node.name);
    nodeName.title = node.name;
    label.appendChild(nodeName);
    label.appendChild(
      el('div', 'slurmlab-NodeState', node.state.toLowerCase())
    );
    label.title =
      `${node.name}: ${node.state} (${node.partitions.join(', ')})` +
      (node.reason ? ` · ${node.reason}` : '');
    row.appendChild(label);
    const cells = el('div', 'slurmlab-GpuCells');
    // a grid of gpuColumns cells a line that shrink with the sidebar, rather than wrapping one onto a line
    cells.style.setProperty(
      '--slurmlab-gpu-columns',
      String(gpuColumns(node.gpus.length))
    );
    if (!node.gpus.length) {
      cells.style.display = 'block';
      cells.appendChild(el('span', 'slurmlab-NoGpu', 'no GPUs'));
    }
    for (const gpu of node.gpus) {
      cells.appendChild(gpuCell(node, gpu, ctx, down, seen));
    }
    row.appendChild(cells);
    target.appendChild(row);
  }
  seen.jobs.sort((a, b) => a.length - b.length || a.localeCompare(b));
  return seen;
}

function legendItem(
  kind: string,
  text: string,
  title?: string
): { item: HTMLElement; swatch: HTMLElement } {
  const item = el('div', 'slurmlab-LegendItem');
  item.dataset.legend = kind;
  const swatch = el('span', `slurmlab-LegendSwatch slurmlab-mod-${kind}`);
  item.appendChild(swatch);
  const label = el('span', 'slurmlab-LegendText', text);
  label.title = title || text;
  item.appendChild(label);
  return { item, swatch };
}

/** The legend: the kinds of cells, then each listed job on the map (colour -> id and name). */
export function renderLegend(
  target: HTMLElement,
  seen: IMapSeen,
  ctx: IMapContext
): void {
  target.replaceChildren();
  const kinds = el('div', 'slurmlab-LegendKinds');
  kinds.appendChild(legendItem('free', 'free').item);
  kinds.appendChild(legendItem('other', "another user's job").item);
  kinds.appendChild(legendItem('down', 'node down or drained').item);
  if (seen.mig) {
    kinds.appendChild(legendItem('mig', 'MIG slice (dashed)').item);
  }
  if (seen.shared) {
    kinds.appendChild(
      legendItem('shared', 'shared GPU: shards used/total').item
    );
  }
  target.appendChild(kinds);
  if (!seen.jobs.length) {
    return;
  }
  const jobs = el('div', 'slurmlab-LegendJobs');
  // thousands of jobs on a big map: the first ones, and how many more (each cell's title names its job)
  for (const id of seen.jobs.slice(0, LEGEND_JOBS)) {
    const job = ctx.jobs.get(id);
    const name = job ? job.name : '';
    const { item, swatch } = legendItem(
      'job',
      `${job ? job.display_id : id} ${name}`,
      jobWords(id, ctx)
    );
    item.dataset.jobId = id;
    swatch.style.background = ctx.palette.colour(id);
    jobs.appendChild(item);
  }
  if (seen.jobs.length > LEGEND_JOBS) {
    const more = seen.jobs.length - LEGEND_JOBS;
    jobs.appendChild(
      el(
        'div',
        'slurmlab-LegendMore',
        `and ${more} more job${more === 1 ? '' : 's'}`
      )
    );
  }
  target.appendChild(jobs);
}
