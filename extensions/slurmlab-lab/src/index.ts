/**
 * slurmlab's JupyterLab plugins: the "Slurm GPUs" panel in the left sidebar (following the refresh
 * interval of its settings), its commands in the command palette and the Launcher (open the queue in the
 * main area, a new allocation request, show the sidebar), and widget outputs that show their saved
 * fallback once the widget is gone.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, MainAreaWidget } from '@jupyterlab/apputils';
import { ILauncher } from '@jupyterlab/launcher';
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
// the queue view is made when its command runs; its module is small and shares sidebar.ts's helpers
// eslint-disable-next-line jupyter/prefer-lazy-imports
import { QueuePanel } from './queueview';
// every notebook's toolbar gets the item at its creation: why a kernel on a GPU node waits
// eslint-disable-next-line jupyter/prefer-lazy-imports
import { kernelWaitPlugin } from './kernelwait';

const PLUGIN_ID = 'slurmlab-lab:plugin';

/** The commands (palette category "Slurm"; the first two are in the Launcher too). */
export const CommandIds = {
  openQueue: 'slurmlab:open-queue',
  newAllocation: 'slurmlab:new-allocation',
  showSidebar: 'slurmlab:show-sidebar',
  refresh: 'slurmlab:refresh'
} as const;

/** The first cell of the notebook "Slurm: new allocation request" opens (and runs): the request form. */
export const ALLOCATION_CELL = '%load_ext slurmlab\n%salloc --form';

const GPU_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">
<g class="jp-icon3" fill="#616161"><path d="M3 6h18v12H3z M5 8v8h14V8z M7 10h4v4H7z M13 10h4v4h-4z
M6 18h2v3H6z M10 18h2v3h-2z M14 18h2v3h-2z"/></g></svg>`;

export const gpuIcon = new LabIcon({ name: 'slurmlab:gpu', svgstr: GPU_SVG });

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'The Slurm GPU map and your Slurm jobs in the left sidebar.',
  autoStart: true,
  optional: [ILayoutRestorer, ISettingRegistry, ICommandPalette, ILauncher],
  activate: (
    app: JupyterFrontEnd,
    restorer: ILayoutRestorer | null,
    settings: ISettingRegistry | null,
    palette: ICommandPalette | null,
    launcher: ILauncher | null
  ) => {
    const sidebar = new SlurmSidebar();
    // the "kernels on GPU nodes" buttons: a new notebook with that kernel spec, as the Launcher's tile opens it
    sidebar.kernels.start = kernelName =>
      void app.commands.execute('notebook:create-new', { kernelName });
    let refreshSeconds = DEFAULT_REFRESH_S;
    // the one queue view: a second "open queue" shows it again rather than opening another
    let queueView: MainAreaWidget<QueuePanel> | null = null;
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
            refreshSeconds = loaded.get('refreshInterval').composite as number;
            sidebar.refreshInterval = refreshSeconds;
            if (queueView && !queueView.isDisposed) {
              queueView.content.refreshInterval = refreshSeconds;
            }
          };
          apply();
          loaded.changed.connect(apply);
        })
        .catch(reason => {
          console.error('slurmlab: cannot load settings', reason);
        });
    }
    const noArgs = { args: { type: 'object' as const, properties: {} } };
    app.commands.addCommand(CommandIds.refresh, {
      label: 'Slurm: refresh the GPU sidebar',
      caption: 'Ask the server for the queue and the GPU map now',
      describedBy: noArgs,
      execute: () => sidebar.refresh()
    });
    app.commands.addCommand(CommandIds.showSidebar, {
      label: 'Slurm: show the GPU sidebar',
      caption: "The cluster's GPU map and your Slurm jobs",
      icon: gpuIcon,
      describedBy: noArgs,
      execute: () => app.shell.activateById(sidebar.id)
    });
    app.commands.addCommand(CommandIds.openQueue, {
      label: args => (args.isLauncher ? 'Slurm queue' : 'Slurm: open queue'),
      caption: 'Your Slurm jobs in the main area: hold, release, cancel',
      icon: gpuIcon,
      describedBy: noArgs,
      execute: () => {
        let open = queueView;
        if (!open || open.isDisposed) {
          const panel = new QueuePanel(refreshSeconds);
          open = new MainAreaWidget({ content: panel });
          open.id = 'slurmlab-queue-view';
          open.title.label = 'Slurm queue';
          open.title.icon = gpuIcon;
          queueView = open;
          app.shell.add(open, 'main');
        }
        app.shell.activateById(open.id);
        return open;
      }
    });
    app.commands.addCommand(CommandIds.newAllocation, {
      label: args =>
        args.isLauncher ? 'Slurm allocation' : 'Slurm: new allocation request',
      caption:
        'A new notebook whose first cell shows the allocation request form (%salloc --form)',
      icon: gpuIcon,
      describedBy: noArgs,
      execute: async () => {
        const kernelName =
          app.serviceManager.kernelspecs.specs?.default || undefined;
        const panel = (await app.commands.execute('notebook:create-new', {
          kernelName
        })) as NotebookPanel;
        await panel.context.ready;
        const cell = panel.content.widgets[0];
        cell.model.sharedModel.setSource(ALLOCATION_CELL);
        await panel.sessionContext.ready;
        const { NotebookActions } = await import('@jupyterlab/notebook');
        await NotebookActions.run(panel.content, panel.sessionContext);
        return panel;
      }
    });
    if (palette) {
      for (const command of Object.values(CommandIds)) {
        palette.addItem({ command, category: 'Slurm' });
      }
    }
    if (launcher) {
      // isLauncher: the card's shorter label ("Slurm queue" under the "Slurm" heading)
      for (const [rank, command] of [
        CommandIds.openQueue,
        CommandIds.newAllocation
      ].entries()) {
        launcher.add({
          command,
          args: { isLauncher: true },
          category: 'Slurm',
          rank: rank + 1
        });
      }
    }
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

export default [plugin, savedOutputs, kernelWaitPlugin];
