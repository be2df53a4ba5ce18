/**
 * clusterpick.ts: which cluster the sidebar shows, remembered per browser tab, and the picker.
 */
import {
  fillPicker,
  resolveChoice,
  storeChoice,
  storedChoice
} from '../clusterpick';
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
