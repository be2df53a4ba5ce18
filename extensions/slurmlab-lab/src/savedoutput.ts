/**
 * Which saved fallback a widget output shows when its widget cannot come back, and how to tell
 * from the widget manager's renderer whether it did. Pure: no Lumino, no rendermime registry.
 *
 * A widget output's display bundle carries the widget's view id plus fallbacks (`text/plain`, often
 * `text/html`). Once the kernel that made it is gone, JupyterLab's widget manager cannot find the
 * model and writes "Error displaying widget: model not found"; the fallbacks say more, and
 * slurmlab's say when the state was seen and how to reconnect.
 */

export const WIDGET_VIEW_MIMETYPE = 'application/vnd.jupyter.widget-view+json';

/** Shown above a saved fallback that is not slurmlab's (slurmlab's own already say "as of … re-run"). */
export const SAVED_NOTE =
  'Saved output: this widget is not live. Re-run the cell to reconnect.';

/** A `class` attribute naming a `slurmlab-…` class: the fallback is slurmlab's own dated text. */
const SLURMLAB_CLASS = /class\s*=\s*["'][^"']*\bslurmlab-/;

/** Text the widget manager's renderer writes when it gives up (jupyterlab-manager's renderer.ts). */
const GAVE_UP = /^\s*Error displaying widget\b/;

export type Bundle = { readonly [mime: string]: unknown };

/** Whether the bundle's HTML fallback is slurmlab's (it states its own age and the way back). */
export function isSlurmlabFallback(data: Bundle): boolean {
  const html = data['text/html'];
  const text = Array.isArray(html) ? html.join('') : html;
  return typeof text === 'string' && SLURMLAB_CLASS.test(text);
}

/** The bundle without the widget view: what is left to show in the widget's place. */
export function withoutWidgetView(data: Bundle): Record<string, unknown> {
  const rest: Record<string, unknown> = { ...data };
  delete rest[WIDGET_VIEW_MIMETYPE];
  return rest;
}

/**
 * The mime type to show instead of a widget that is gone, or null to keep the widget manager's
 * message. `preferred` is the notebook's own ranking (rendermime's `preferredMimeType`), so a
 * widget with an image or HTML fallback shows what JupyterLab would show for that bundle. A bare
 * `text/plain` (ipywidgets' `IntSlider(value=3)`) says less than the manager's message, except
 * slurmlab's, which is dated.
 */
export function fallbackMimeType(
  data: Bundle,
  preferred: (bundle: Record<string, unknown>) => string | undefined
): string | null {
  const rest = withoutWidgetView(data);
  if (Object.keys(rest).length === 0) {
    return null;
  }
  const mime = preferred(rest);
  if (!mime) {
    return null;
  }
  if (mime === 'text/plain' && !isSlurmlabFallback(data)) {
    return null;
  }
  return mime;
}

export type WidgetOutcome = 'widget' | 'failed' | 'pending';

/**
 * What the widget manager's renderer has come to, from its node: a view is an element it adds;
 * "Loading widget..." and the error messages are plain text it sets.
 */
export function widgetOutcome(
  elementChildren: number,
  text: string | null
): WidgetOutcome {
  if (elementChildren > 0) {
    return 'widget';
  }
  return GAVE_UP.test(text ?? '') ? 'failed' : 'pending';
}
