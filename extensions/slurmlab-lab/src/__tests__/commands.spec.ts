/**
 * index.ts: slurmlab's commands in the command palette and the Launcher (issue 28: nothing in either).
 */
import { CommandRegistry } from '@lumino/commands';

import plugins, { ALLOCATION_CELL, CommandIds } from '../index';

// JupyterLab's packages as far as the plugin uses them at activation (their ES modules load only in a browser)
jest.mock('@jupyterlab/application', () => ({ ILayoutRestorer: {} }));
jest.mock('@jupyterlab/apputils', () => {
  const { Widget } = jest.requireActual('@lumino/widgets');
  class MainAreaWidget extends Widget {
    constructor(readonly options: { content: any }) {
      super();
    }
    get content(): any {
      return this.options.content;
    }
  }
  return {
    ICommandPalette: {},
    MainAreaWidget,
    Dialog: {},
    showDialog: jest.fn()
  };
});
jest.mock('@jupyterlab/launcher', () => ({ ILauncher: {} }));
jest.mock('@jupyterlab/notebook', () => ({ INotebookTracker: {} }));
jest.mock('@jupyterlab/rendermime', () => ({ IRenderMimeRegistry: {} }));
jest.mock('@jupyterlab/settingregistry', () => ({ ISettingRegistry: {} }));
jest.mock('@jupyterlab/ui-components', () => ({
  LabIcon: class {
    constructor(readonly options: unknown) {}
  }
}));
jest.mock('../widgetfallback', () => ({ installSavedOutputs: jest.fn() }));

jest.mock('../sidebar', () => {
  const { Widget } = jest.requireActual('@lumino/widgets');
  class SlurmSidebar extends Widget {
    // the real one's "kernels on GPU nodes" section: the plugin sets what its buttons do
    readonly kernels: { start: ((name: string) => void) | null } = {
      start: null
    };
    constructor() {
      super();
      this.id = 'slurmlab-sidebar';
    }
    refresh(): Promise<void> {
      return Promise.resolve();
    }
    set refreshInterval(seconds: number) {
      // the real one sets its poll's interval
    }
  }
  return { ...jest.requireActual('../sidebar'), SlurmSidebar };
});

describe('the sidebar plugin', () => {
  it('puts its commands in the palette under "Slurm", and the queue and a request in the Launcher', () => {
    const commands = new CommandRegistry();
    const app = {
      commands,
      shell: { add: jest.fn(), activateById: jest.fn() },
      serviceManager: { kernelspecs: { specs: null } }
    };
    const palette = { addItem: jest.fn() };
    const launcher = { add: jest.fn() };
    const plugin = plugins[0];
    plugin.activate(app as any, null, null, palette, launcher);
    const inPalette = palette.addItem.mock.calls.map(c => c[0]);
    expect(inPalette.map(i => i.category)).toEqual(
      Array(inPalette.length).fill('Slurm')
    );
    expect(inPalette.map(i => i.command).sort()).toEqual(
      Object.values(CommandIds).sort()
    );
    expect(commands.label(CommandIds.openQueue)).toBe('Slurm: open queue');
    expect(commands.label(CommandIds.newAllocation)).toBe(
      'Slurm: new allocation request'
    );
    expect(launcher.add.mock.calls.map(c => c[0].command)).toEqual([
      CommandIds.openQueue,
      CommandIds.newAllocation
    ]);
    expect(commands.label(CommandIds.openQueue, { isLauncher: true })).toBe(
      'Slurm queue'
    );
    // the Launcher's and the palette's way in to the sidebar
    void commands.execute(CommandIds.showSidebar);
    expect(app.shell.activateById).toHaveBeenCalledWith('slurmlab-sidebar');
  });

  it("makes the sidebar's kernel buttons open a new notebook with that kernel spec", () => {
    const commands = new CommandRegistry();
    const opened = jest.fn();
    commands.addCommand('notebook:create-new', { execute: opened });
    const app = {
      commands,
      shell: { add: jest.fn(), activateById: jest.fn() },
      serviceManager: { kernelspecs: { specs: null } }
    };
    plugins[0].activate(app as any, null, null, null, null);
    const sidebar = app.shell.add.mock.calls.find(c => c[1] === 'left')[0];
    sidebar.kernels.start('slurmlab-gpu');
    expect(opened).toHaveBeenCalledWith({ kernelName: 'slurmlab-gpu' });
  });

  it('opens one queue view in the main area, and shows it again when asked twice', async () => {
    const commands = new CommandRegistry();
    const app = {
      commands,
      shell: { add: jest.fn(), activateById: jest.fn() },
      serviceManager: { kernelspecs: { specs: null } }
    };
    plugins[0].activate(app as any, null, null, null, null);
    const first = await commands.execute(CommandIds.openQueue);
    expect(app.shell.add).toHaveBeenCalledWith(first, 'main');
    const mainAdds = () =>
      app.shell.add.mock.calls.filter(c => c[1] === 'main').length;
    expect(mainAdds()).toBe(1);
    const second = await commands.execute(CommandIds.openQueue);
    expect(second).toBe(first);
    expect(mainAdds()).toBe(1);
    expect(app.shell.activateById).toHaveBeenLastCalledWith(
      'slurmlab-queue-view'
    );
    (first as any).dispose();
    expect(ALLOCATION_CELL).toBe('%load_ext slurmlab\n%salloc --form');
  });
});
