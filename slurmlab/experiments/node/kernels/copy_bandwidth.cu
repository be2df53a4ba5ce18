// Copy bandwidth: grid-stride float4 copy; bytes moved = 2 * n * 16 (read + write).

extern "C" __global__ void copy_bandwidth(const float4* __restrict__ src,
                                          float4* __restrict__ dst,
                                          unsigned long long n) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        dst[i] = src[i];
    }
}
