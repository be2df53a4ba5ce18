/**
 * Server answers for the tests, typed with api.ts's interfaces: the compiler holds each one to the
 * interfaces, and tests/integration/server/test_server_contract.py holds the interfaces to
 * slurmlab/server/contract.py, field by field. The values are those a sandbox cluster answers.
 */
import type {
  ICluster,
  IClusters,
  IGpuSlot,
  IJob,
  INode,
  INodes,
  IQueue,
  IRecentJob,
  IRecentJobs,
  ISession,
  IStatus
} from '../api';

export const OWN: ICluster = {
  id: 'default',
  name: 'gpu-cluster',
  sandbox: null,
  label: 'gpu-cluster',
  conf: null,
  own: true
};

export const SANDBOX: ICluster = {
  id: 'sandbox-dgx-h100',
  name: 'slurmlab',
  sandbox: 'dgx-h100',
  label: 'slurmlab · sandbox dgx-h100',
  conf: '/tmp/slurmlab/dgx-h100/etc/slurm.conf',
  own: false
};

export function clusters(...list: ICluster[]): IClusters {
  return { clusters: list.length ? list : [OWN], default: OWN.id };
}

export function status(reachable = true): IStatus {
  return {
    cluster: OWN,
    reachable,
    version: reachable ? '22.05.8' : null,
    poll_interval_s: 20,
    cluster_poll_interval_s: 60,
    user: 'alice',
    error: reachable ? null : 'slurmctld does not answer on 127.0.0.1:6817',
    error_kind: reachable ? null : 'ControllerDownError',
    slow: null
  };
}

export function gpu(index: number, more: Partial<IGpuSlot> = {}): IGpuSlot {
  return {
    index,
    type: 'h100',
    mig: false,
    jobs: [],
    shards_used: 0,
    shards_total: 0,
    whole: false,
    ...more
  };
}

export function node(name: string, gpus: IGpuSlot[], state = 'MIXED'): INode {
  return {
    name,
    state,
    partitions: ['gpu'],
    cpus: 64,
    alloc_cpus: 8,
    gres: `gpu:h100:${gpus.length}`,
    reason: null,
    gpus
  };
}

export function nodes(...list: INode[]): INodes {
  return { nodes: list, problems: [] };
}

export function job(jobId: string, more: Partial<IJob> = {}): IJob {
  return {
    job_id: jobId,
    display_id: jobId,
    name: `train-${jobId}`,
    user: 'alice',
    mine: true,
    state: 'RUNNING',
    reason: null,
    reason_words: null,
    reason_hint: null,
    partition: 'gpu',
    nodes: 'node1',
    time_limit_s: 3600,
    submit_time: '2026-12-04T10:00:00',
    start_time: '2026-12-04T10:00:05',
    expected_start: null,
    ends_at: '2026-12-04T11:00:05',
    gpus: [{ node: 'node1', index: 0, type: 'h100', kind: 'gpu', count: 1 }],
    gres: 'gpu:h100:1',
    ...more
  };
}

export function queue(...jobs: IJob[]): IQueue {
  return { scope: 'mine', user: 'alice', jobs, problems: [] };
}

export function recentJob(
  jobId: string,
  more: Partial<IRecentJob> = {}
): IRecentJob {
  return {
    job_id: jobId,
    name: `train-${jobId}`,
    state: 'COMPLETED',
    state_words: 'completed',
    exit_code: 0,
    signal: null,
    elapsed_s: 602,
    time_limit_s: 600,
    gpus: 1,
    start_time: '2026-12-04T09:00:00',
    end_time: '2026-12-04T09:10:02',
    efficiency: null,
    ...more
  };
}

export function recent(...jobs: IRecentJob[]): IRecentJobs {
  return {
    user: 'alice',
    since_hours: 24,
    accounting: true,
    message: null,
    jobs
  };
}

export const SESSION_WORDS =
  "the job this Jupyter server runs in: slurmlab never cancels it; it ends when the server is stopped (the hub's control panel) or its time runs out, and this session with it";

/** A server outside any job (a login node's Jupyter). */
export function noSession(): ISession {
  return { job_id: null, job: null, problem: null, words: SESSION_WORDS };
}

/** A server that runs in job `job` (JupyterHub's batchspawner, Open OnDemand). */
export function session(running: IJob): ISession {
  return {
    job_id: running.job_id,
    job: running,
    problem: null,
    words: SESSION_WORDS
  };
}
