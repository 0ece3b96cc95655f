// Sparse matrix-vector product y = A x in double precision, three variants chosen by the tuner:
//   spmv_csr_scalar  one work-item per row (CSR)
//   spmv_csr_vector  THREADS_PER_ROW work-items per row, partial sums reduced in local memory;
//                    BLOCK_SIZE / THREADS_PER_ROW rows per work-group (CSR)
//   spmv_sell        sliced ELLPACK with slices of BLOCK_SIZE rows, each slice padded to its
//                    longest row and stored column by column so that neighbouring work-items
//                    read neighbouring entries (SELL-C with C = BLOCK_SIZE)
// Set with -D: BLOCK_SIZE (work-group size), THREADS_PER_ROW (power of two, vector variant).
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#ifndef BLOCK_SIZE
#define BLOCK_SIZE 128
#endif
#ifndef THREADS_PER_ROW
#define THREADS_PER_ROW 8
#endif

__kernel __attribute__((reqd_work_group_size(BLOCK_SIZE, 1, 1)))
void spmv_csr_scalar(const int rows, const __global int* restrict row_ptr,
                     const __global int* restrict col, const __global double* restrict val,
                     const __global double* restrict x, __global double* restrict y) {
  const int row = get_global_id(0);
  if (row >= rows) {
    return;
  }
  double sum = 0.0;
  for (int j = row_ptr[row]; j < row_ptr[row + 1]; ++j) {
    sum += val[j] * x[col[j]];
  }
  y[row] = sum;
}

__kernel __attribute__((reqd_work_group_size(BLOCK_SIZE, 1, 1)))
void spmv_csr_vector(const int rows, const __global int* restrict row_ptr,
                     const __global int* restrict col, const __global double* restrict val,
                     const __global double* restrict x, __global double* restrict y) {
  __local double partial[BLOCK_SIZE];
  const int lid = get_local_id(0);
  const int lane = lid % THREADS_PER_ROW;
  const int row = get_group_id(0) * (BLOCK_SIZE / THREADS_PER_ROW) + lid / THREADS_PER_ROW;

  double sum = 0.0;
  if (row < rows) {
    for (int j = row_ptr[row] + lane; j < row_ptr[row + 1]; j += THREADS_PER_ROW) {
      sum += val[j] * x[col[j]];
    }
  }
  partial[lid] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  // Tree reduction inside each group of THREADS_PER_ROW lanes; every work-item reaches every
  // barrier, rows past the end included.
  for (int offset = THREADS_PER_ROW / 2; offset > 0; offset /= 2) {
    if (lane < offset) {
      partial[lid] += partial[lid + offset];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lane == 0 && row < rows) {
    y[row] = partial[lid];
  }
}

// SELL-C-sigma as kernels/spmv.h's to_sell builds it with C = BLOCK_SIZE: the slot of entry e
// of sorted row r (slice s = r / BLOCK_SIZE, lane i = r % BLOCK_SIZE) is
// slice_ptr[s] + e * BLOCK_SIZE + i, padding has value 0, and with SELL_PERMUTED the sorted row
// r holds original row row_of[r].
#ifndef SELL_PERMUTED
#define SELL_PERMUTED 0
#endif
__kernel __attribute__((reqd_work_group_size(BLOCK_SIZE, 1, 1)))
void spmv_sell(const int rows, const __global int* restrict slice_ptr,
               const __global int* restrict row_of, const __global int* restrict col,
               const __global double* restrict val, const __global double* restrict x,
               __global double* restrict y) {
  const int row = get_global_id(0);
  if (row >= rows) {
    return;
  }
  const int slice = get_group_id(0);
  const int base = slice_ptr[slice] + get_local_id(0);
  const int length = (slice_ptr[slice + 1] - slice_ptr[slice]) / BLOCK_SIZE;
  double sum = 0.0;
  for (int e = 0; e < length; ++e) {
    const int j = base + e * BLOCK_SIZE;
    sum += val[j] * x[col[j]];
  }
#if SELL_PERMUTED == 1
  y[row_of[row]] = sum;
#else
  y[row] = sum;
#endif
}
