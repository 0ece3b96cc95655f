// CUDA twin of kernels/opencl/conv.cl (Kernel Tuner's convolution parameters):
//   out[y][x] = sum_{i<FILTER_HEIGHT, j<FILTER_WIDTH} in[y + i][x + j] * filter[i][j]
// on an input with a border of filter-1 pixels. READ_ONLY reads the input through the
// read-only data cache (__ldg); USE_CMEM passes the filter by value, which CUDA places in
// constant memory, instead of through a global pointer. Launch with blocks of
// BLOCK_SIZE_X x BLOCK_SIZE_Y threads, each computing TILE_SIZE_X x TILE_SIZE_Y pixels.
#ifndef IMAGE_WIDTH
#define IMAGE_WIDTH 1024
#endif
#ifndef IMAGE_HEIGHT
#define IMAGE_HEIGHT 1024
#endif
#ifndef BLOCK_SIZE_X
#define BLOCK_SIZE_X 16
#endif
#ifndef BLOCK_SIZE_Y
#define BLOCK_SIZE_Y 16
#endif
#ifndef TILE_SIZE_X
#define TILE_SIZE_X 1
#endif
#ifndef TILE_SIZE_Y
#define TILE_SIZE_Y 1
#endif
#ifndef USE_SHMEM
#define USE_SHMEM 1
#endif
#ifndef USE_PADDING
#define USE_PADDING 0
#endif
#ifndef READ_ONLY
#define READ_ONLY 0
#endif
#ifndef USE_CMEM
#define USE_CMEM 1
#endif
#ifndef FILTER_WIDTH
#define FILTER_WIDTH 15
#endif
#ifndef FILTER_HEIGHT
#define FILTER_HEIGHT 15
#endif

#define INPUT_WIDTH (IMAGE_WIDTH + FILTER_WIDTH - 1)
#define INPUT_HEIGHT (IMAGE_HEIGHT + FILTER_HEIGHT - 1)
#define TILE_WIDTH (BLOCK_SIZE_X * TILE_SIZE_X)
#define TILE_HEIGHT (BLOCK_SIZE_Y * TILE_SIZE_Y)
#define SH_WIDTH (TILE_WIDTH + FILTER_WIDTH - 1)
#define SH_HEIGHT (TILE_HEIGHT + FILTER_HEIGHT - 1)
#define BANKS 32
#if USE_PADDING == 1
#define SH_STRIDE (SH_WIDTH + (((BLOCK_SIZE_X - SH_WIDTH) % BANKS) + BANKS) % BANKS)
#else
#define SH_STRIDE SH_WIDTH
#endif

#if READ_ONLY == 1
#define LOAD(p) __ldg(&(p))
#define INPUT_POINTER const float* __restrict__
#else
#define LOAD(p) (p)
#define INPUT_POINTER const float*
#endif

#if USE_CMEM == 1
struct Filter {
  float w[FILTER_HEIGHT * FILTER_WIDTH];
};
#define FILTER_PARAMETER const Filter filter
#define WEIGHT(i) filter.w[i]
#else
#define FILTER_PARAMETER const float* __restrict__ filter
#define WEIGHT(i) filter[i]
#endif

extern "C" __global__ void __launch_bounds__(BLOCK_SIZE_X* BLOCK_SIZE_Y)
    convolution(float* output, INPUT_POINTER input, FILTER_PARAMETER) {
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int x0 = blockIdx.x * TILE_WIDTH;
  const int y0 = blockIdx.y * TILE_HEIGHT;

  float sum[TILE_SIZE_Y][TILE_SIZE_X];
#pragma unroll
  for (int yi = 0; yi < TILE_SIZE_Y; ++yi) {
#pragma unroll
    for (int xi = 0; xi < TILE_SIZE_X; ++xi) sum[yi][xi] = 0.0f;
  }

#if USE_SHMEM == 1
  __shared__ float tile[SH_HEIGHT * SH_STRIDE];
  for (int i = ty; i < SH_HEIGHT; i += BLOCK_SIZE_Y) {
    for (int j = tx; j < SH_WIDTH; j += BLOCK_SIZE_X) {
      const int y = y0 + i;
      const int x = x0 + j;
      tile[i * SH_STRIDE + j] =
          (y < INPUT_HEIGHT && x < INPUT_WIDTH) ? LOAD(input[y * INPUT_WIDTH + x]) : 0.0f;
    }
  }
  __syncthreads();
  for (int fi = 0; fi < FILTER_HEIGHT; ++fi) {
    for (int fj = 0; fj < FILTER_WIDTH; ++fj) {
      const float w = WEIGHT(fi * FILTER_WIDTH + fj);
#pragma unroll
      for (int yi = 0; yi < TILE_SIZE_Y; ++yi) {
#pragma unroll
        for (int xi = 0; xi < TILE_SIZE_X; ++xi) {
          sum[yi][xi] +=
              tile[(ty + yi * BLOCK_SIZE_Y + fi) * SH_STRIDE + tx + xi * BLOCK_SIZE_X + fj] * w;
        }
      }
    }
  }
#else
  for (int fi = 0; fi < FILTER_HEIGHT; ++fi) {
    for (int fj = 0; fj < FILTER_WIDTH; ++fj) {
      const float w = WEIGHT(fi * FILTER_WIDTH + fj);
#pragma unroll
      for (int yi = 0; yi < TILE_SIZE_Y; ++yi) {
        const int y = y0 + ty + yi * BLOCK_SIZE_Y;
#pragma unroll
        for (int xi = 0; xi < TILE_SIZE_X; ++xi) {
          const int x = x0 + tx + xi * BLOCK_SIZE_X;
          if (y < IMAGE_HEIGHT && x < IMAGE_WIDTH) {
            sum[yi][xi] += LOAD(input[(y + fi) * INPUT_WIDTH + x + fj]) * w;
          }
        }
      }
    }
  }
#endif

#pragma unroll
  for (int yi = 0; yi < TILE_SIZE_Y; ++yi) {
    const int y = y0 + ty + yi * BLOCK_SIZE_Y;
#pragma unroll
    for (int xi = 0; xi < TILE_SIZE_X; ++xi) {
      const int x = x0 + tx + xi * BLOCK_SIZE_X;
      if (y < IMAGE_HEIGHT && x < IMAGE_WIDTH) output[y * IMAGE_WIDTH + x] = sum[yi][xi];
    }
  }
}
