/**
 * Job colours of the sidebar: one colour per job, the same on every node and in the job list and legend,
 * and no two jobs on screen alike while there are fewer than PALETTE.length of them.
 *
 * A hash of the job id into a few hues repeats after a handful of jobs (issue 13: after 6), so colours
 * come from a fixed palette of well-separated colours (Kelly's colours of maximum contrast, grey left out
 * because grey means "another user's job"). A job takes the slot of its id (consecutive ids get
 * different colours) unless a job on screen holds it, then the next free one, and keeps it while it is
 * shown.
 *
 * No DOM and no JupyterLab here: tests load the compiled module in node.
 */

export const PALETTE: readonly string[] = [
  '#0067a5', // blue
  '#f38400', // orange
  '#008856', // green
  '#be0032', // red
  '#875692', // purple
  '#a1caf1', // light blue
  '#f3c300', // yellow
  '#882d17', // reddish brown
  '#e68fac', // pink
  '#8db600', // yellow green
  '#604e97', // violet
  '#f99379', // salmon
  '#2b3d26', // olive
  '#c2b280', // buff
  '#b3446c', // purplish red
  '#dcd300', // greenish yellow
  '#654522', // brown
  '#e25822', // reddish orange
  '#f6a600' // orange yellow
];

/** The slot a job id prefers: its number (an array task's job id), so consecutive jobs differ. */
export function preferredSlot(
  jobId: string,
  size: number = PALETTE.length
): number {
  const digits = /^\d+/.exec(jobId);
  if (digits) {
    return Number(BigInt(digits[0]) % BigInt(size));
  }
  let hash = 0;
  for (const ch of jobId) {
    hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
  }
  return hash % size;
}

export class JobPalette {
  private readonly _slots = new Map<string, number>();

  constructor(private readonly _colours: readonly string[] = PALETTE) {}

  /** The colour of a job: its slot's colour; past the palette's size, a hue no slot has. */
  colour(jobId: string): string {
    const slot = this.slot(jobId);
    if (slot < this._colours.length) {
      return this._colours[slot];
    }
    return `hsl(${(slot * 137.508) % 360}, 45%, 40%)`;
  }

  /** The job's slot, taking the first free one from its preferred slot on when it has none yet. */
  slot(jobId: string): number {
    const held = this._slots.get(jobId);
    if (held !== undefined) {
      return held;
    }
    const taken = new Set(this._slots.values());
    const size = this._colours.length;
    const start = preferredSlot(jobId, size);
    let slot = start;
    for (let step = 0; step < size && taken.has(slot); step++) {
      slot = (start + step + 1) % size;
    }
    if (taken.has(slot)) {
      slot = size;
      while (taken.has(slot)) {
        slot++;
      }
    }
    this._slots.set(jobId, slot);
    return slot;
  }

  /** Forget the jobs no longer shown, so that their colours go to new jobs. */
  keep(jobIds: Iterable<string>): void {
    const live = new Set(jobIds);
    for (const id of [...this._slots.keys()]) {
      if (!live.has(id)) {
        this._slots.delete(id);
      }
    }
  }
}

/** A node state Slurm gives a node that runs no jobs: down, drained, failed or not responding. */
export function nodeIsDown(state: string): boolean {
  return /DOWN|DRAIN|FAIL|NOT_RESPONDING|INVAL|\*$/i.test(state);
}

/** Black or white, whichever reads better on a `#rrggbb` colour (other colours: the theme's text colour). */
export function textOn(colour: string): string {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(colour);
  if (!m) {
    return 'var(--jp-ui-font-color0)';
  }
  const [r, g, b] = [m[1], m[2], m[3]].map(h => parseInt(h, 16) / 255);
  // perceived brightness (ITU-R BT.601 weights)
  return 0.299 * r + 0.587 * g + 0.114 * b > 0.6 ? '#000' : '#fff';
}
