// Interval logger: one thread spins on %globaltimer, a device-wide nanosecond clock that every
// context on the GPU shares, so the runs of all processes fall on one time axis.
// A jump larger than `threshold_ns` between two reads means this context was switched out.
// runs[2*i] / runs[2*i+1] = start / end of run i; only the first `capacity` runs are stored,
// `*n_runs` counts them all so the host can report truncation.

__device__ __forceinline__ unsigned long long read_globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void timeslice_logger(unsigned long long start_ns,
                                            unsigned long long end_ns,
                                            unsigned long long threshold_ns,
                                            unsigned long long* runs,
                                            unsigned long long capacity,
                                            unsigned long long* n_runs) {
    if (blockIdx.x != 0 || threadIdx.x != 0) {
        return;
    }
    unsigned long long t = read_globaltimer();
    while (t < start_ns) {
        t = read_globaltimer();
    }
    unsigned long long count = 0;
    unsigned long long run_start = t;
    unsigned long long prev = t;
    while (t < end_ns) {
        t = read_globaltimer();
        if (t - prev > threshold_ns) {
            if (count < capacity) {
                runs[2 * count] = run_start;
                runs[2 * count + 1] = prev;
            }
            ++count;
            run_start = t;
        }
        prev = t;
    }
    if (count < capacity) {
        runs[2 * count] = run_start;
        runs[2 * count + 1] = prev;
    }
    *n_runs = count + 1;
}
