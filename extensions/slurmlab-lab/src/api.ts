/**
 * The only module that talks to the server: typed calls to <base_url>/slurmlab/api/.
 *
 * The interfaces below mirror slurmlab/server/contract.py (TS_INTERFACES pairs them); a Python
 * test compares the two field by field, so a field added on one side must be added on the other.
 *
 * ServerConnection.makeRequest adds Jupyter's token and the XSRF header, which the
 * server requires on every route (and on POST in particular).
 *
 * Every call but getClusters() asks about the cluster chosen with setCluster() (the server's own
 * when none is chosen): the choice travels as the `cluster` query parameter.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** One GPU of a job on one node (index is the node-local GPU index). */
export interface IJobGpu {
  node: string;
  index: number | null;
  type: string | null;
  kind: string;
  count: number | null;
}

export interface IJob {
  job_id: string;
  display_id: string;
  name: string;
  /** The owner, from Slurm's uid of the job (null when Slurm did not list it). */
  user: string | null;
  /** Owned by the Unix user the server runs as (decided by uid, never by the job's record). */
  mine: boolean;
  state: string;
  /** The pending reason as Slurm spells it. */
  reason: string | null;
  /** The reason in plain words, and what would help (slurmlab.core.slurm.reasons). */
  reason_words: string | null;
  reason_hint: string | null;
  partition: string | null;
  nodes: string | null;
  time_limit_s: number | null;
  /** When it was submitted (ISO); the sidebar counts "pending for" up from it. */
  submit_time: string | null;
  start_time: string | null;
  /** Slurm's expected start of a pending job (ISO), once Slurm has one. */
  expected_start: string | null;
  /** When the time limit ends a running job (ISO); the sidebar counts down to it. */
  ends_at: string | null;
  gpus: IJobGpu[];
  gres: string | null;
}

/** One physical GPU (or MIG-typed device) of a node and who uses it. */
export interface IGpuSlot {
  index: number;
  type: string | null;
  mig: boolean;
  jobs: string[];
  shards_used: number;
  shards_total: number;
  whole: boolean;
}

export interface INode {
  name: string;
  state: string;
  partitions: string[];
  cpus: number | null;
  alloc_cpus: number | null;
  gres: string | null;
  reason: string | null;
  gpus: IGpuSlot[];
}

/** A record Slurm printed that could not be read (listed instead of hiding it). */
export interface IProblem {
  kind: string;
  record: string | null;
  message: string;
}

/** Every answer says when Slurm last confirmed it. */
export interface IStamped {
  as_of?: string;
  age_s?: number;
}

export interface IQueue extends IStamped {
  scope: 'mine' | 'all';
  user: string;
  jobs: IJob[];
  problems: IProblem[];
}

export interface INodes extends IStamped {
  nodes: INode[];
  problems: IProblem[];
}

/** The SSH link to a cluster on another machine. */
export interface ILink {
  url: string;
  /** up; connecting (never up yet); down (since `since`, reconnecting); needs_login (connect it from a notebook) */
  state: 'up' | 'connecting' | 'down' | 'needs_login';
  /** When it was found down, in seconds since the epoch; null while up. */
  since: number | null;
  message: string | null;
}

/** A cluster the server can show: its own Slurm, a slurmlab sandbox of this user, or one over SSH. */
export interface ICluster {
  id: string;
  name: string | null;
  sandbox: string | null;
  label: string;
  conf: string | null;
  own: boolean;
  /** Only for a cluster over SSH. */
  link?: ILink;
}

export interface IClusters extends IStamped {
  clusters: ICluster[];
  default: string;
}

export interface IStatus extends IStamped {
  /** The cluster this answer is about. */
  cluster: ICluster | null;
  reachable: boolean;
  version: string | null;
  /** Seconds between the server's listings of the user's own jobs (`squeue --me`). */
  poll_interval_s: number;
  /** Seconds between its whole-cluster listings (the GPU map, "all jobs"): the site's setting. */
  cluster_poll_interval_s: number;
  user: string;
  error: string | null;
  error_kind: string | null;
  /** While slow answers or Slurm's rate limit stretch the polls: who slows the updates, how often they come. */
  slow: string | null;
}

/** One job with the whole model Slurm gave (jobs/ID). */
export interface IJobDetail extends IJob, IStamped {
  detail: Record<string, unknown>;
}

export interface ICancelled {
  job_id: string;
  cancelled: boolean;
  /** The Unix user the server runs as, whose job it was. */
  user: string;
}

/** The answer of a hold or release (scontrol) of one of the server user's pending jobs. */
export interface IJobAction {
  job_id: string;
  action: string;
  done: boolean;
  user: string;
}

/** The body of an error answer. */
export interface IErrorBody {
  message: string;
  reason: string | null;
}

/** An error answer of the server, with its HTTP status and message. */
export interface IRecentJob {
  job_id: string;
  name: string;
  state: string;
  state_words: string;
  exit_code: number | null;
  signal: number | null;
  elapsed_s: number | null;
  time_limit_s: number | null;
  gpus: number;
  start_time: string | null;
  end_time: string | null;
  efficiency: string | null;
}

export interface IRecentJobs extends IStamped {
  user: string;
  since_hours: number;
  accounting: boolean;
  message: string | null;
  jobs: IRecentJob[];
}

/** The job this Jupyter server runs in (JupyterHub's batchspawner, Open OnDemand), if any. */
export interface IKernelGpu {
  node: string;
  /** The node's GPU indices the kernel's job holds. */
  indices: number[];
}

/** One kernel started by slurmlab's provisioner and the job it runs in. */
export interface IKernelJob {
  kernel_id: string;
  /** The kernel spec's name. */
  kernel_name: string;
  /** The notebook it was started for. */
  notebook: string | null;
  /** checking | pending | starting | running | ended | released | refused */
  phase: string;
  job_id: string | null;
  /** The provisioner's sentence (why it waits, how it ended). */
  message: string;
  reason: string | null;
  why: string;
  expected_start: string | null;
  nodes: string[];
  gpus: IKernelGpu[];
  step: string | null;
  request: string;
  /** When the time limit ends the job (running only); the client counts down. */
  ends_at: string | null;
}

export interface IKernelSpec {
  name: string;
  display_name: string;
}

export interface IKernels extends IStamped {
  kernels: IKernelJob[];
  /** Installed kernel specs that start a kernel on a GPU node. */
  specs: IKernelSpec[];
  /** The kernel owns its job: shutting it down releases it. */
  words: string;
}

export interface ISession extends IStamped {
  job_id: string | null;
  /** Read once by the server; the job's row of the latest own-jobs listing is newer. */
  job: IJob | null;
  problem: string | null;
  /** What becomes of it: slurmlab never cancels it, it ends when the server is stopped. */
  words: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
  }
}

let chosenCluster: string | null = null;

/** Ask every later call about this cluster (null: the server's own). */
export function setCluster(id: string | null): void {
  chosenCluster = id;
}

export function currentCluster(): string | null {
  return chosenCluster;
}

/** `path` with the chosen cluster as its `cluster` query parameter. */
export function withCluster(
  path: string,
  cluster: string | null = chosenCluster
): string {
  if (!cluster) {
    return path;
  }
  const sep = path.includes('?') ? '&' : '?';
  return `${path}${sep}cluster=${encodeURIComponent(cluster)}`;
}

async function call<T>(path: string, init: RequestInit = {}): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'slurmlab', 'api', path);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ApiError(0, `cannot reach the Jupyter server: ${String(error)}`);
  }
  const text = await response.text();
  let body: any = null;
  if (text.length > 0) {
    try {
      body = JSON.parse(text);
    } catch {
      body = { message: text };
    }
  }
  if (!response.ok) {
    const error = body as Partial<IErrorBody> | null;
    const message =
      (error && (error.message || error.reason)) ||
      `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, message);
  }
  // The server stamps every answer with when Slurm last confirmed it; a 304 revalidation
  // refreshes the header but not the cached body, so the header is what counts.
  const asOf = response.headers.get('X-Slurmlab-As-Of');
  const served = response.headers.get('Date');
  if (body && typeof body === 'object' && asOf) {
    body.as_of = asOf;
    const now = served ? Date.parse(served) : Date.now();
    body.age_s = Math.max(0, (now - Date.parse(asOf)) / 1000);
  }
  return body as T;
}

export function getClusters(): Promise<IClusters> {
  return call<IClusters>('clusters');
}

export function getStatus(): Promise<IStatus> {
  return call<IStatus>(withCluster('status'));
}

export function getQueue(scope: 'mine' | 'all' = 'mine'): Promise<IQueue> {
  return call<IQueue>(withCluster(`queue?scope=${scope}`));
}

export function getNodes(): Promise<INodes> {
  return call<INodes>(withCluster('nodes'));
}

export function getJob(jobId: string): Promise<IJobDetail> {
  return call<IJobDetail>(withCluster(`jobs/${encodeURIComponent(jobId)}`));
}

export function cancelJob(jobId: string): Promise<ICancelled> {
  return call<ICancelled>(
    withCluster(`jobs/${encodeURIComponent(jobId)}/cancel`),
    {
      method: 'POST',
      body: '{}'
    }
  );
}

export function getRecentJobs(): Promise<IRecentJobs> {
  return call<IRecentJobs>(withCluster('recent'));
}

/** The job this server runs in: asked of the server's own cluster only (a sandbox is another Slurm). */
export function getSession(): Promise<ISession> {
  return call<ISession>('session');
}

/** This server's kernels on GPU nodes (slurmlab's kernel provisioner) and the specs that start one. */
export function getKernels(): Promise<IKernels> {
  return call<IKernels>('kernels');
}

/** `scontrol uhold` (Slurm does not start it until released) or `release` of one of my pending jobs. */
export function holdOrRelease(
  jobId: string,
  action: 'hold' | 'release'
): Promise<IJobAction> {
  return call<IJobAction>(
    withCluster(`jobs/${encodeURIComponent(jobId)}/${action}`),
    { method: 'POST', body: '{}' }
  );
}
