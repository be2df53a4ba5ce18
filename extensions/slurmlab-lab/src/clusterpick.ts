/**
 * Which cluster the sidebar shows: the server lists the clusters it can see (its own Slurm, this user's
 * running slurmlab sandboxes and the clusters over SSH its settings name, each with its link's state); the choice belongs to the browser session (sessionStorage, so two tabs may
 * look at two clusters), and a `slurmlab-cluster=ID` query parameter of the lab's URL picks one at load.
 */
import { ICluster, IClusters, ILink } from './api';
import { el } from './dom';

const STORAGE_KEY = 'slurmlab-cluster';
const URL_PARAM = 'slurmlab-cluster';

function storage(): Storage | null {
  try {
    return window.sessionStorage;
  } catch {
    return null; // storage refused (privacy settings): the choice lasts as long as the page
  }
}

/** The cluster chosen for this browser session: the lab URL's parameter first, then the stored choice. */
export function storedChoice(): string | null {
  const fromUrl = new URLSearchParams(window.location.search).get(URL_PARAM);
  if (fromUrl) {
    storage()?.setItem(STORAGE_KEY, fromUrl);
    return fromUrl;
  }
  return storage()?.getItem(STORAGE_KEY) || null;
}

export function storeChoice(id: string | null): void {
  const store = storage();
  if (id) {
    store?.setItem(STORAGE_KEY, id);
  } else {
    store?.removeItem(STORAGE_KEY);
  }
}

/**
 * The cluster to show from the server's list: the chosen one when the server still knows it, else the
 * server's own, with a note saying why the choice was not kept.
 */
export function resolveChoice(
  choice: string | null,
  answer: IClusters
): { cluster: ICluster; note: string | null } {
  const own =
    answer.clusters.find(c => c.id === answer.default) || answer.clusters[0];
  if (!choice || choice === 'default') {
    return { cluster: own, note: null };
  }
  const found = answer.clusters.find(c => c.id === choice);
  if (found) {
    return { cluster: found, note: null };
  }
  return {
    cluster: own,
    note: `cluster ${choice} is not running any more; showing ${own.label}`
  };
}

function hhmm(seconds: number): string {
  const at = new Date(seconds * 1000);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(at.getHours())}:${two(at.getMinutes())}`;
}

/** A link's state in a few words: up; connecting; down since HH:MM, reconnecting; needs a login. */
export function linkWords(link: ILink): string {
  switch (link.state) {
    case 'up':
      return 'link up';
    case 'connecting':
      return 'connecting';
    case 'down':
      return link.since !== null
        ? `link down since ${hhmm(link.since)}, reconnecting`
        : 'link down, reconnecting';
    default:
      return 'needs a login';
  }
}

/** What the picker says for a cluster: its label, and over SSH its link's state. */
export function pickerText(cluster: ICluster): string {
  return cluster.link
    ? `${cluster.label} (${linkWords(cluster.link)})`
    : cluster.label;
}

/** Fill the picker with the server's clusters, `selected` chosen (kept as it is when nothing changed). */
export function fillPicker(
  picker: HTMLSelectElement,
  clusters: ICluster[],
  selected: string
): void {
  const same =
    picker.options.length === clusters.length &&
    clusters.every(
      (c, i) =>
        picker.options[i].value === c.id &&
        picker.options[i].textContent === pickerText(c)
    );
  if (!same) {
    picker.replaceChildren();
    for (const cluster of clusters) {
      const option = el('option', undefined, pickerText(cluster));
      option.value = cluster.id;
      option.title = cluster.link
        ? cluster.link.message || `${cluster.label} (${cluster.link.url})`
        : cluster.conf
          ? `${cluster.label} (${cluster.conf})`
          : cluster.label;
      if (cluster.link) {
        option.dataset.link = cluster.link.state;
      }
      picker.appendChild(option);
    }
  }
  picker.value = selected;
  picker.disabled = clusters.length < 2;
  // one cluster: the name above says it; the same words again in a disabled picker said it twice
  picker.hidden = clusters.length < 2;
  picker.title =
    clusters.length < 2
      ? 'the only cluster this server sees; a sandbox started with `%slurm sandbox up PROFILE` appears here'
      : 'the cluster the sidebar shows (for this browser tab)';
}
