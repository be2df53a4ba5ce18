/**
 * clusterpick.ts: which cluster the sidebar shows, remembered per browser tab, and the picker.
 */
import {
  fillPicker,
  linkWords,
  resolveChoice,
  storeChoice,
  storedChoice
} from '../clusterpick';
import { ICluster } from '../api';
import * as fx from './fixtures';

beforeEach(() => {
  window.sessionStorage.clear();
  window.history.replaceState(null, '', '/lab');
});

describe('resolveChoice', () => {
  it("shows the server's own cluster when nothing is chosen", () => {
    const answer = fx.clusters(fx.OWN, fx.SANDBOX);
    expect(resolveChoice(null, answer)).toEqual({
      cluster: fx.OWN,
      note: null
    });
    expect(resolveChoice('default', answer)).toEqual({
      cluster: fx.OWN,
      note: null
    });
  });

  it('shows the chosen cluster while the server still lists it', () => {
    const answer = fx.clusters(fx.OWN, fx.SANDBOX);
    expect(resolveChoice(fx.SANDBOX.id, answer).cluster).toBe(fx.SANDBOX);
  });

  it('falls back to the own cluster, saying so, when the chosen one stopped', () => {
    const { cluster, note } = resolveChoice(fx.SANDBOX.id, fx.clusters(fx.OWN));
    expect(cluster).toBe(fx.OWN);
    expect(note).toBe(
      `cluster ${fx.SANDBOX.id} is not running any more; showing ${fx.OWN.label}`
    );
  });
});

describe('the stored choice', () => {
  it('lasts for the browser tab, and is forgotten when cleared', () => {
    expect(storedChoice()).toBeNull();
    storeChoice('sandbox-a');
    expect(storedChoice()).toBe('sandbox-a');
    storeChoice(null);
    expect(storedChoice()).toBeNull();
  });

  it("takes the lab URL's slurmlab-cluster parameter first, and keeps it", () => {
    storeChoice('sandbox-a');
    window.history.replaceState(null, '', '/lab?slurmlab-cluster=sandbox-b');
    expect(storedChoice()).toBe('sandbox-b');
    window.history.replaceState(null, '', '/lab');
    expect(storedChoice()).toBe('sandbox-b');
  });
});

describe('fillPicker', () => {
  it('lists the clusters, selects the shown one, and is off with one cluster', () => {
    const picker = document.createElement('select');
    fillPicker(picker, [fx.OWN, fx.SANDBOX], fx.SANDBOX.id);
    expect(
      Array.from(picker.options).map(o => [o.value, o.textContent])
    ).toEqual([
      [fx.OWN.id, fx.OWN.label],
      [fx.SANDBOX.id, fx.SANDBOX.label]
    ]);
    expect(picker.value).toBe(fx.SANDBOX.id);
    expect(picker.disabled).toBe(false);
    expect(picker.options[1].title).toContain(fx.SANDBOX.conf as string);

    fillPicker(picker, [fx.OWN], fx.OWN.id);
    expect(picker.options.length).toBe(1);
    expect(picker.disabled).toBe(true);
    expect(picker.title).toContain('%slurm sandbox up');
  });

  it('keeps its options (and an open list) when nothing changed', () => {
    const picker = document.createElement('select');
    fillPicker(picker, [fx.OWN, fx.SANDBOX], fx.OWN.id);
    const first = picker.options[0];
    fillPicker(picker, [fx.OWN, fx.SANDBOX], fx.OWN.id);
    expect(picker.options[0]).toBe(first);
  });
});

describe('a cluster over SSH in the picker', () => {
  // the shape slurmlab/server/remote.py answers (RemoteCluster.view)
  const remote = (link: ICluster['link']): ICluster => ({
    id: 'ssh-alice@login.example',
    name: null,
    sandbox: null,
    label: 'alice@login.example',
    conf: null,
    own: false,
    link
  });
  const url = 'ssh://alice@login.example';

  it('says its link state beside its label, with the words in the title', () => {
    const since = new Date(2026, 11, 5, 4, 7).getTime() / 1000;
    const picker = document.createElement('select');
    const up = remote({ url, state: 'up', since: null, message: null });
    fillPicker(picker, [fx.OWN, up], fx.OWN.id);
    expect(picker.options[1].textContent).toBe('alice@login.example (link up)');
    expect(picker.options[1].dataset.link).toBe('up');

    const message = `the link to ${url} is down since 04:07; reconnecting`;
    const down = remote({ url, state: 'down', since, message });
    fillPicker(picker, [fx.OWN, down], fx.OWN.id);
    expect(picker.options[1].textContent).toBe(
      'alice@login.example (link down since 04:07, reconnecting)'
    );
    expect(picker.options[1].dataset.link).toBe('down');
    expect(picker.options[1].title).toBe(message);
  });

  it('names each state in words', () => {
    expect(
      linkWords({ url, state: 'connecting', since: null, message: null })
    ).toBe('connecting');
    expect(
      linkWords({
        url,
        state: 'needs_login',
        since: 0,
        message: 'needs a login'
      })
    ).toBe('needs a login');
    expect(linkWords({ url, state: 'down', since: null, message: null })).toBe(
      'link down, reconnecting'
    );
  });
});
