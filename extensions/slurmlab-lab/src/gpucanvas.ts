/**
 * The GPU map of a large cluster, drawn on one canvas: 8,000 GPUs are 8,000 small rectangles, painted in a
 * few milliseconds, where as many DOM cells (with their titles and styles) stall the page at every refresh.
 *
 * Nodes are packed in a grid of blocks, one block per node, one square per GPU in Slurm's order; the colours
 * and words are those of the small map (gpumap.ts): a listed job's colour, grey for another user's job, a
 * cross on the free GPUs of a node that is down. Hovering a square shows its node, GPU and job in the
 * canvas's title; a line above the canvas sums the map up.
 */
import { IGpuSlot, INode } from './api';
import { el } from './dom';
import type { IMapContext, IMapSeen } from './gpumap';
import { cellState, cellTitle } from './gpumap';
import { nodeIsDown } from './palette';

/** Maps with more GPUs than this are drawn on a canvas. */
export const LARGE_MAP_GPUS = 512;

const CELL = 7;
const GAP = 1;
const NODE_GAP = 5;
const LINE_GAP = 3;

interface ICellDraw {
  node: INode;
  gpu: IGpuSlot;
  down: boolean;
  busy: boolean;
  state: string;
  colour: string | null;
}

function cssColour(
  target: HTMLElement,
  name: string,
  fallback: string
): string {
  const value = getComputedStyle(target).getPropertyValue(name).trim();
  return value || fallback;
}

/** Where each node's block goes: blocks of the widest node, as many per line as the width allows. */
function layout(
  nodes: INode[],
  width: number
): { perLine: number; blockW: number; lineH: number } {
  const widest = Math.max(1, ...nodes.map(n => n.gpus.length));
  const blockW = widest * (CELL + GAP) + NODE_GAP;
  return {
    perLine: Math.max(1, Math.floor(width / blockW)),
    blockW,
    lineH: CELL + LINE_GAP
  };
}

/** Draw `nodes` on a canvas in `target`; fills `seen` for the legend as the small map does. */
export function renderCanvasMap(
  target: HTMLElement,
  nodes: INode[],
  ctx: IMapContext,
  seen: IMapSeen
): void {
  const cells: ICellDraw[][] = nodes.map(node => {
    const down = nodeIsDown(node.state);
    return node.gpus.map(gpu => {
      const { state, listed, busy } = cellState(gpu, ctx, down, seen);
      return {
        node,
        gpu,
        down,
        busy,
        state,
        colour: listed.length ? ctx.palette.colour(listed[0]) : null
      };
    });
  });
  const flat = cells.flat();
  const used = flat.filter(c => c.busy).length;
  const downNodes = nodes.filter(n => nodeIsDown(n.state)).length;
  const summary = el(
    'div',
    'slurmlab-MapSummary',
    `${nodes.length} nodes · ${flat.length} GPUs · ${used} in use · ${flat.length - used} free` +
      (downNodes
        ? ` · ${downNodes} node${downNodes === 1 ? '' : 's'} down or drained`
        : '') +
      ' (point at a square for its node, GPU and job)'
  );
  const canvas = el('canvas', 'slurmlab-GpuCanvas');
  canvas.dataset.nodes = String(nodes.length);
  canvas.dataset.gpus = String(flat.length);
  canvas.dataset.used = String(used);
  target.appendChild(summary);
  target.appendChild(canvas);

  const width = Math.max(120, target.clientWidth || 300);
  const { perLine, blockW, lineH } = layout(nodes, width);
  const lines = Math.ceil(nodes.length / perLine);
  const height = lines * lineH;
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.ceil(perLine * blockW * ratio);
  canvas.height = Math.ceil(height * ratio);
  canvas.style.width = `${perLine * blockW}px`;
  canvas.style.height = `${height}px`;
  const g = canvas.getContext('2d');
  if (!g) {
    return; // no 2D context (a headless test DOM): the summary still says it all
  }
  g.scale(ratio, ratio);
  const free = cssColour(target, '--jp-layout-color2', '#eeeeee');
  // darker than a free GPU, and never one of the job colours
  const other = cssColour(target, '--jp-ui-font-color3', '#8a8a8a');
  const cross = cssColour(target, '--jp-error-color1', '#d32f2f');
  const border = cssColour(target, '--jp-border-color1', '#9e9e9e');
  // One path per colour, not one fillStyle and fillRect per GPU: setting fillStyle parses a CSS colour each
  // time, and 8,000 of them were most of a draw. Layers in order: the squares, the jobs' colours over them,
  // the crosses of down nodes, the borders of MIG GPUs (squares never overlap, so within a layer order is free).
  const squares = new Map<string, number[]>();
  const jobs = new Map<string, number[]>();
  const crosses: number[] = [];
  const borders: number[] = [];
  const add = (
    layer: Map<string, number[]>,
    colour: string,
    ...rect: number[]
  ): void => {
    const list = layer.get(colour);
    if (list) {
      list.push(...rect);
    } else {
      layer.set(colour, rect);
    }
  };
  cells.forEach((row, i) => {
    const x0 = (i % perLine) * blockW;
    const y0 = Math.floor(i / perLine) * lineH;
    row.forEach((c, k) => {
      const x = x0 + k * (CELL + GAP);
      add(squares, c.state === 'other' ? other : free, x, y0, CELL, CELL);
      if (c.colour) {
        const shared =
          c.gpu.shards_total > 0 && c.gpu.shards_used > 0 && !c.gpu.whole;
        const h = shared
          ? Math.max(
              1,
              Math.round((CELL * c.gpu.shards_used) / c.gpu.shards_total)
            )
          : CELL;
        add(jobs, c.colour, x, y0 + CELL - h, CELL, h);
      }
      if (c.state === 'down') {
        crosses.push(x, y0);
      }
      if (c.gpu.mig) {
        borders.push(x, y0);
      }
    });
  });
  for (const layer of [squares, jobs]) {
    layer.forEach((rects, colour) => {
      g.fillStyle = colour;
      g.beginPath();
      for (let r = 0; r < rects.length; r += 4) {
        g.rect(rects[r], rects[r + 1], rects[r + 2], rects[r + 3]);
      }
      g.fill();
    });
  }
  if (crosses.length) {
    g.strokeStyle = cross;
    g.beginPath();
    for (let r = 0; r < crosses.length; r += 2) {
      g.moveTo(crosses[r], crosses[r + 1] + CELL);
      g.lineTo(crosses[r] + CELL, crosses[r + 1]);
    }
    g.stroke();
  }
  if (borders.length) {
    g.strokeStyle = border;
    g.beginPath();
    for (let r = 0; r < borders.length; r += 2) {
      g.rect(borders[r] + 0.5, borders[r + 1] + 0.5, CELL - 1, CELL - 1);
    }
    g.stroke();
  }
  canvas.addEventListener('mousemove', event => {
    const box = canvas.getBoundingClientRect();
    const x = event.clientX - box.left;
    const y = event.clientY - box.top;
    const col = Math.floor(x / blockW);
    const index = Math.floor(y / lineH) * perLine + col;
    const k = Math.floor((x - col * blockW) / (CELL + GAP));
    const c =
      col < perLine && index >= 0 && index < cells.length
        ? cells[index][k]
        : undefined;
    canvas.title = c ? cellTitle(c.node, c.gpu, ctx, c.down, c.busy) : '';
  });
}
