/**
 * slurmlab's JupyterLab plugins: the "Slurm GPUs" panel in the left sidebar (following the refresh
 * interval of its settings), and widget outputs that show their saved fallback once the widget is gone.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { IRenderMime, IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { LabIcon } from '@jupyterlab/ui-components';

import { WIDGET_VIEW_MIMETYPE } from './savedoutput';
// Both are needed at activation: the panel goes into the shell (and the layout restorer) at start, and
// every notebook opened from then on gets the saved-output renderers.
// eslint-disable-next-line jupyter/prefer-lazy-imports
import { DEFAULT_REFRESH_S, SlurmSidebar } from './sidebar';
// eslint-disable-next-line jupyter/prefer-lazy-imports
import { installSavedOutputs } from './widgetfallback';

const PLUGIN_ID = 'slurmlab-lab:plugin';

const GPU_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">
<g class="jp-icon3" fill="#616161"><path d="M3 6h18v12H3z M5 8v8h14V8z M7 10h4v4H7z M13 10h4v4h-4z
M6 18h2v3H6z M10 18h2v3h-2z M14 18h2v3h-2z"/></g></svg>`;

export const gpuIcon = new LabIcon({ name: 'slurmlab:gpu', svgstr: GPU_SVG });

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'The Slurm GPU map and your Slurm jobs in the left sidebar.',
  autoStart: true,
  optional: [ILayoutRestorer, ISettingRegistry],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    settings: ISettingRegistry | null
  ) => {
    const sidebar = new SlurmSidebar();
    sidebar.title.icon = gpuIcon;
    sidebar.refreshInterval = DEFAULT_REFRESH_S;
    app.shell.add(sidebar, 'left', { rank: 600 });
    if (restorer) {
      restorer.add(sidebar, 'slurmlab-sidebar');
    }
    if (settings) {
      settings
        .load(PLUGIN_ID)
        .then(loaded => {
          const apply = () => {
            sidebar.refreshInterval = loaded.get('refreshInterval')
              .composite as number;
          };
          apply();
          loaded.changed.connect(apply);
        })
        .catch(reason => {
          console.error('slurmlab: cannot load settings', reason);
        });
    }
    app.commands.addCommand('slurmlab:refresh', {
      label: 'Refresh Slurm GPUs',
      describedBy: { args: { type: 'object', properties: {} } },
      execute: () => sidebar.refresh()
    });
  }
};

/**
 * A reopened notebook's widget outputs (kernel gone or restarted) show their saved text/HTML, e.g.
 * slurmlab's "allocation 7: RUNNING as of … re-run the cell to reconnect", instead of "Error
 * displaying widget: model not found"; a widget whose model lives still renders as the widget.
 */
const savedOutputs: JupyterFrontEndPlugin<void> = {
  id: 'slurmlab-lab:saved-outputs',
  description:
    'Widget outputs whose widget is gone show their saved fallback, not "model not found".',
  autoStart: true,
  requires: [INotebookTracker, IRenderMimeRegistry],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    rendermime: IRenderMimeRegistry
  ) => {
    // each notebook's registry is a clone of the app's: the app's widget factory is the manager's
    // placeholder, shared by identity until the notebook's own manager replaces it
    const isPlaceholder = (factory: IRenderMime.IRendererFactory) =>
      factory === rendermime.getFactory(WIDGET_VIEW_MIMETYPE);
    const hook = (panel: NotebookPanel) =>
      installSavedOutputs(panel.content.rendermime, isPlaceholder);
    tracker.forEach(hook);
    tracker.widgetAdded.connect((_, panel) => hook(panel));
  }
};

export default [plugin, savedOutputs];
