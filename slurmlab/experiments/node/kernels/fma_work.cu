// Fixed work: every thread runs eight independent FMA chains for `iters` steps. The amount of
// work does not depend on time, so its duration shows slowdown when the GPU is shared
// (a timer-spin kernel would end on time whatever happens).
// FLOPs = 2 * 8 * iters * total threads.

extern "C" __global__ void fma_work(float* out, int iters, float a, float b) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    float x0 = tid * 1e-7f, x1 = x0 + 1.0f, x2 = x0 + 2.0f, x3 = x0 + 3.0f;
    float x4 = x0 + 4.0f, x5 = x0 + 5.0f, x6 = x0 + 6.0f, x7 = x0 + 7.0f;
    for (int i = 0; i < iters; ++i) {
        x0 = fmaf(x0, a, b);
        x1 = fmaf(x1, a, b);
        x2 = fmaf(x2, a, b);
        x3 = fmaf(x3, a, b);
        x4 = fmaf(x4, a, b);
        x5 = fmaf(x5, a, b);
        x6 = fmaf(x6, a, b);
        x7 = fmaf(x7, a, b);
    }
    // one store per thread keeps the chains alive without adding memory traffic
    out[tid] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}
