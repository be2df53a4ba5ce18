/**
 * A notebook's widget outputs show the widget while its model lives, and the output's saved
 * fallback (ranked as JupyterLab ranks any bundle) once it cannot come back, in place of the widget
 * manager's "Error displaying widget: model not found".
 *
 * The widget manager (`@jupyter-widgets/jupyterlab-manager`) registers its renderer factory in each
 * notebook's rendermime registry only once the notebook's kernel is ready; until then an app-wide
 * placeholder factory stands in. Both go through the registry's `addFactory`, so wrapping that one
 * method catches the manager's factory whenever it comes, whichever of the two extensions saw the
 * notebook first. Our renderer then asks the manager's renderer (the "inner" one) and watches what
 * it comes to.
 */
import { IRenderMime, IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { Panel, Widget } from '@lumino/widgets';

import {
  fallbackMimeType,
  isSlurmlabFallback,
  SAVED_NOTE,
  WIDGET_VIEW_MIMETYPE,
  widgetOutcome
} from './savedoutput';

/** On every widget output; `data-slurmlab-output` says what it shows: widget, saved, loading or failed. */
export const OUTPUT_CLASS = 'slurmlab-widget-output';
/** The saved fallback shown in a gone widget's place. */
export const SAVED_CLASS = 'slurmlab-saved-output';
/** The line above a fallback that is not slurmlab's own. */
export const NOTE_CLASS = 'slurmlab-saved-note';

type JSONBundle = Parameters<IRenderMimeRegistry['preferredMimeType']>[0];

/** One notebook registry's current widget-manager factory and the renderers made through it. */
interface IHook {
  inner: IRenderMime.IRendererFactory;
  /** Whether `inner` is bound to a widget manager (not the app-wide placeholder). */
  live: boolean;
  renderers: Set<WidgetOrSavedOutput>;
}

const hooked = new WeakSet<IRenderMimeRegistry>();
const wrappers = new WeakSet<IRenderMime.IRendererFactory>();

/**
 * Put the fallback-aware renderer in front of whatever widget-view factory `rendermime` has or gets.
 * `isPlaceholder` tells the app-wide placeholder (no widget manager yet) from a manager's factory.
 */
export function installSavedOutputs(
  rendermime: IRenderMimeRegistry,
  isPlaceholder: (factory: IRenderMime.IRendererFactory) => boolean
): void {
  if (hooked.has(rendermime)) {
    return;
  }
  hooked.add(rendermime);
  const addFactory = rendermime.addFactory.bind(rendermime);
  const renderers = new Set<WidgetOrSavedOutput>();

  const adopt = (factory: IRenderMime.IRendererFactory, rank?: number) => {
    const current: IHook = {
      inner: factory,
      live: !isPlaceholder(factory),
      renderers
    };
    const wrapper: IRenderMime.IRendererFactory = {
      safe: factory.safe,
      mimeTypes: [WIDGET_VIEW_MIMETYPE],
      defaultRank: factory.defaultRank,
      createRenderer: options =>
        new WidgetOrSavedOutput(options, rendermime, current)
    };
    wrappers.add(wrapper);
    addFactory(wrapper, rank);
    // outputs already on the page were made with the factory before: let them try the new one
    for (const renderer of Array.from(renderers)) {
      renderer.factoryChanged(current);
    }
  };

  rendermime.addFactory = (
    factory: IRenderMime.IRendererFactory,
    rank?: number
  ) => {
    const widgetOnly =
      factory.mimeTypes.length === 1 &&
      factory.mimeTypes[0] === WIDGET_VIEW_MIMETYPE;
    if (widgetOnly && !wrappers.has(factory)) {
      adopt(factory, rank);
    } else {
      addFactory(factory, rank);
    }
  };

  const existing = rendermime.getFactory(WIDGET_VIEW_MIMETYPE);
  if (existing && !wrappers.has(existing) && existing.mimeTypes.length === 1) {
    adopt(existing, rendermime.getRank(WIDGET_VIEW_MIMETYPE));
  }
}

/**
 * One widget output: the manager's renderer while the widget can come, the saved fallback when it
 * cannot. With a placeholder factory (no kernel yet, or none at all) the fallback shows at once and
 * the widget replaces it if the manager finds the model later.
 */
export class WidgetOrSavedOutput
  extends Panel
  implements IRenderMime.IRenderer
{
  constructor(
    private readonly _options: IRenderMime.IRendererOptions,
    private readonly _rendermime: IRenderMimeRegistry,
    private _hook: IHook
  ) {
    super();
    this.mimeType = _options.mimeType;
    this.addClass(OUTPUT_CLASS);
    this._hook.renderers.add(this);
  }

  readonly mimeType: string;

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this._clear();
    this._model = model;
    this._fallback = fallbackMimeType(model.data, bundle =>
      this._rendermime.preferredMimeType(
        bundle as JSONBundle,
        model.trusted ? 'any' : 'ensure'
      )
    );
    const source = model.data[this.mimeType] as
      { model_id?: string } | undefined;
    if (!this._fallback || source?.model_id === '') {
      // nothing better than the manager's own words; an empty id is a closed view, which hides
      this._fallback = null;
      return this._attempt(true);
    }
    if (this._hook.live) {
      return this._attempt(true);
    }
    return this._showSaved();
  }

  /** The registry has a new widget-manager factory: outputs not showing a live widget try it. */
  factoryChanged(hook: IHook): void {
    this._hook = hook;
    if (
      !this._model ||
      this._outcome === 'widget' ||
      this._attemptFactory === hook.inner
    ) {
      return;
    }
    this._dropAttempt();
    if (!this._fallback) {
      void this._attempt(true);
    } else if (hook.live) {
      // behind the fallback until the manager has the model: a gone widget never flashes
      void this._attempt(false);
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._clear();
    this._hook.renderers.delete(this);
    super.dispose();
  }

  private async _attempt(visible: boolean): Promise<void> {
    const model = this._model;
    if (!model) {
      return;
    }
    const inner = this._hook.inner.createRenderer(this._options);
    this._inner = inner;
    this._attemptFactory = this._hook.inner;
    this._outcome = 'pending';
    if (!visible) {
      inner.hide();
    } else {
      this._mark('loading');
    }
    this.addWidget(inner);
    const check = () => this._judge(inner);
    this._observer = new MutationObserver(check);
    this._observer.observe(inner.node, { childList: true });
    try {
      await inner.renderModel(model);
    } catch (reason) {
      console.error('slurmlab: the widget renderer failed', reason);
    }
    check();
  }

  private _judge(inner: IRenderMime.IRenderer): void {
    if (inner !== this._inner || this._outcome !== 'pending') {
      return;
    }
    const outcome = widgetOutcome(
      inner.node.childElementCount,
      inner.node.textContent
    );
    if (outcome === 'pending') {
      return;
    }
    this._outcome = outcome;
    this._observer?.disconnect();
    this._observer = null;
    if (outcome === 'widget') {
      this._saved?.dispose();
      this._saved = null;
      inner.show();
      this._mark('widget');
    } else if (this._fallback) {
      this._dropAttempt();
      void this._showSaved();
    } else {
      this._mark('failed');
    }
  }

  private async _showSaved(): Promise<void> {
    const model = this._model;
    if (!model || !this._fallback || this._saved) {
      return;
    }
    const saved = new Panel();
    saved.addClass(SAVED_CLASS);
    if (!isSlurmlabFallback(model.data)) {
      const note = new Widget();
      note.addClass(NOTE_CLASS);
      note.node.textContent = SAVED_NOTE;
      saved.addWidget(note);
    }
    const renderer = this._rendermime.createRenderer(this._fallback);
    saved.addWidget(renderer);
    this._saved = saved;
    // first, so a widget tried behind it lands below and replaces it in place
    this.insertWidget(0, saved);
    this._mark('saved');
    try {
      await renderer.renderModel(model);
    } catch (reason) {
      console.error('slurmlab: cannot show the saved output', reason);
    }
  }

  private _dropAttempt(): void {
    this._observer?.disconnect();
    this._observer = null;
    this._inner?.dispose();
    this._inner = null;
    this._attemptFactory = null;
    this._outcome = null;
  }

  private _clear(): void {
    this._dropAttempt();
    this._saved?.dispose();
    this._saved = null;
    this._model = null;
    this._fallback = null;
  }

  private _mark(shows: 'widget' | 'saved' | 'loading' | 'failed'): void {
    this.node.dataset.slurmlabOutput = shows;
  }

  private _model: IRenderMime.IMimeModel | null = null;
  private _fallback: string | null = null;
  private _inner: IRenderMime.IRenderer | null = null;
  private _attemptFactory: IRenderMime.IRendererFactory | null = null;
  private _outcome: 'widget' | 'failed' | 'pending' | null = null;
  private _observer: MutationObserver | null = null;
  private _saved: Panel | null = null;
}
