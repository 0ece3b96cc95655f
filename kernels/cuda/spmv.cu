// CUDA twin of kernels/opencl/spmv.cl: y = A x in double precision, variants
// spmv_csr_scalar (a thread per row), spmv_csr_vector (THREADS_PER_ROW threads per row, reduced
// with warp shuffles; THREADS_PER_ROW divides 32 so a row never spans two warps) and spmv_sell
// (SELL-C-sigma with C = BLOCK_SIZE, as kernels/spmv.h's to_sell lays it out). Launch with
// blocks of BLOCK_SIZE threads.
#ifndef BLOCK_SIZE
#define BLOCK_SIZE 128
#endif
#ifndef THREADS_PER_ROW
#define THREADS_PER_ROW 8
#endif
#ifndef SELL_PERMUTED
#define SELL_PERMUTED 0
#endif

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
    spmv_csr_scalar(const int rows, const int* __restrict__ row_ptr, const int* __restrict__ col,
                    const double* __restrict__ val, const double* __restrict__ x,
                    double* __restrict__ y) {
  const int row = blockIdx.x * BLOCK_SIZE + threadIdx.x;
  if (row >= rows) return;
  double sum = 0.0;
  for (int j = row_ptr[row]; j < row_ptr[row + 1]; ++j) sum += val[j] * __ldg(&x[col[j]]);
  y[row] = sum;
}

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
    spmv_csr_vector(const int rows, const int* __restrict__ row_ptr, const int* __restrict__ col,
                    const double* __restrict__ val, const double* __restrict__ x,
                    double* __restrict__ y) {
  const int lane = threadIdx.x % THREADS_PER_ROW;
  const int row = blockIdx.x * (BLOCK_SIZE / THREADS_PER_ROW) + threadIdx.x / THREADS_PER_ROW;
  double sum = 0.0;
  if (row < rows) {
    for (int j = row_ptr[row] + lane; j < row_ptr[row + 1]; j += THREADS_PER_ROW) {
      sum += val[j] * __ldg(&x[col[j]]);
    }
  }
  // Every thread of the warp takes part in the shuffles, rows past the end included.
#pragma unroll
  for (int offset = THREADS_PER_ROW / 2; offset > 0; offset /= 2) {
    sum += __shfl_down_sync(0xffffffffu, sum, offset, THREADS_PER_ROW);
  }
  if (lane == 0 && row < rows) y[row] = sum;
}

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
    spmv_sell(const int rows, const int* __restrict__ slice_ptr, const int* __restrict__ row_of,
              const int* __restrict__ col, const double* __restrict__ val,
              const double* __restrict__ x, double* __restrict__ y) {
  const int row = blockIdx.x * BLOCK_SIZE + threadIdx.x;
  if (row >= rows) return;
  const int base = slice_ptr[blockIdx.x] + threadIdx.x;
  const int length = (slice_ptr[blockIdx.x + 1] - slice_ptr[blockIdx.x]) / BLOCK_SIZE;
  double sum = 0.0;
  for (int e = 0; e < length; ++e) {
    const int j = base + e * BLOCK_SIZE;
    sum += val[j] * __ldg(&x[col[j]]);
  }
#if SELL_PERMUTED == 1
  y[row_of[row]] = sum;
#else
  (void)row_of;
  y[row] = sum;
#endif
}
