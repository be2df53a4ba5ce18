/**
 * slurmlab's JupyterLab plugin: adds the "Slurm GPUs" panel to the left sidebar and
 * follows the refresh interval of its settings.
 */
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { LabIcon } from '@jupyterlab/ui-components';

import { DEFAULT_REFRESH_S, SlurmSidebar } from './sidebar';

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
            sidebar.refreshInterval = loaded.get('refreshInterval').composite as number;
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
      execute: () => sidebar.refresh()
    });
  }
};

export default plugin;
