/**
 * The sidebar's job table. Up to VIRTUAL_OVER jobs every row is in the DOM, as before; past that (a real
 * cluster's "all jobs": 10,000) the table sits in its own scroll box and only the rows in view, plus a few
 * either side, are built: two spacer rows stand for the rest, so the scroll bar is the whole list's.
 * Building 10,000 rows (20,000 with the pending lines) took the browser seconds at every answer.
 *
 * A job's rows (its line, and the "why pending" line under a pending job) are built together by the
 * sidebar's `rows` function; their height is measured as they are shown, and the spacers use the average.
 */
import type { IJob } from './api';
import { el } from './dom';

/** More jobs than this and the table is virtualised. */
export const VIRTUAL_OVER = 200;
/** Jobs built beyond each edge of the view, so that a short scroll finds rows ready. */
const OVERSCAN = 12;
/** The scroll box's height: most of the sidebar, leaving the map and the headers in sight. */
const BOX_HEIGHT = '60vh';
/** A job's rows before any were measured (one line and a bit). */
const FIRST_GUESS_PX = 34;

export class JobTable {
  /** What the sidebar appends: the scroll box (virtual) or a plain holder, with the table inside. */
  readonly node: HTMLElement = el('div', 'slurmlab-JobTableBox');
  private _table: HTMLTableElement = el('table', 'slurmlab-JobTable');
  private _jobs: IJob[] = [];
  private _perJob = FIRST_GUESS_PX;
  private _shown: [number, number] = [-1, -1];
  private _frame = 0;
  private _measured = false;

  constructor(
    private readonly _head: () => HTMLElement,
    private readonly _rows: (job: IJob) => HTMLElement[]
  ) {
    this.node.appendChild(this._table);
    this.node.addEventListener('scroll', () => this._schedule(), {
      passive: true
    });
  }

  /** Show these jobs (a new answer), scrolled to `scrollTop` (the place the last answer was read at). */
  render(jobs: IJob[], scrollTop = 0): void {
    this._jobs = jobs;
    const virtual = jobs.length > VIRTUAL_OVER;
    this.node.dataset.virtual = String(virtual);
    this.node.dataset.jobs = String(jobs.length);
    this.node.style.maxHeight = virtual ? BOX_HEIGHT : '';
    this.node.style.overflowY = virtual ? 'auto' : '';
    this._shown = [-1, -1];
    this._measured = false;
    if (!virtual) {
      this._table.replaceChildren(this._head());
      for (const job of jobs) {
        this._table.append(...this._rows(job));
      }
      return;
    }
    this._paint(scrollTop);
    this.node.scrollTop = scrollTop;
  }

  private _schedule(): void {
    if (this._jobs.length <= VIRTUAL_OVER || this._frame) {
      return;
    }
    this._frame = requestAnimationFrame(() => {
      this._frame = 0;
      this._paint();
    });
  }

  /** The jobs in view [first, last) from the scroll position and the measured height per job. */
  private _window(at: number): [number, number] {
    const count = this._jobs.length;
    const height = this.node.clientHeight || window.innerHeight * 0.6;
    const first = Math.max(0, Math.floor(at / this._perJob) - OVERSCAN);
    const last = Math.min(
      count,
      Math.ceil((at + height) / this._perJob) + OVERSCAN
    );
    return [Math.min(first, Math.max(0, last - 1)), last];
  }

  private _paint(at: number = this.node.scrollTop): void {
    const [first, last] = this._window(at);
    if (first === this._shown[0] && last === this._shown[1]) {
      return;
    }
    this._shown = [first, last];
    const top = el('tr', 'slurmlab-JobSpacer');
    const bottom = el('tr', 'slurmlab-JobSpacer');
    top.style.height = `${first * this._perJob}px`;
    bottom.style.height = `${(this._jobs.length - last) * this._perJob}px`;
    const rows: HTMLElement[] = [];
    for (let k = first; k < last; k++) {
      rows.push(...this._rows(this._jobs[k]));
    }
    const head = this._head();
    for (const cell of Array.from(head.children) as HTMLElement[]) {
      // the column titles stay in sight while the rows scroll under them
      cell.style.position = 'sticky';
      cell.style.top = '0';
      cell.style.background = 'var(--jp-layout-color1)';
      cell.style.zIndex = '1';
    }
    this._table.replaceChildren(head, top, ...rows, bottom);
    if (this._measured) {
      return;
    }
    // the rows' real height, measured once per answer (not at every scroll: the box would jump), for the
    // spacers; laid out again when the guess was off by more than a pixel
    this._measured = true;
    const built = bottom.offsetTop - (top.offsetTop + top.offsetHeight);
    if (
      last > first &&
      built > 0 &&
      Math.abs(built / (last - first) - this._perJob) > 1
    ) {
      this._perJob = built / (last - first);
      this._shown = [-1, -1];
      this._schedule();
    }
  }
}
