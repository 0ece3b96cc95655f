// 2D convolution (correlation) of an image with a filter, with the tuning parameters of Kernel
// Tuner's convolution example as measured in ../shared/data/gpu/convolution_hub:
//   out[y][x] = sum_{i<FILTER_HEIGHT, j<FILTER_WIDTH} in[y + i][x + j] * filter[i][j]
// The input is the image with a border of FILTER_HEIGHT-1 rows and FILTER_WIDTH-1 columns, so
// every output pixel has a full neighbourhood.
//
// Set with -D, each parameter under its name in upper case (OpenCL C reserves read_only):
//   IMAGE_WIDTH, IMAGE_HEIGHT     output size (the evaluator's problem size)
//   BLOCK_SIZE_X, BLOCK_SIZE_Y    work-group shape
//   TILE_SIZE_X, TILE_SIZE_Y      output pixels per work-item in x and y (strided by the block)
//   USE_SHMEM                     1: stage the work-group's input tile in local memory
//   USE_PADDING                   1: pad the local tile's rows so that the row stride is
//                                 congruent to BLOCK_SIZE_X modulo 32 banks, which makes the
//                                 rows of a warp spanning several rows conflict-free
//   READ_ONLY                     1: declare the input const restrict (read-only data path)
//   USE_CMEM                      1: filter in __constant memory, 0: in __global memory
//   FILTER_WIDTH, FILTER_HEIGHT   filter size
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
#define INPUT_POINTER const __global float* restrict
#else
#define INPUT_POINTER __global float*
#endif
#if USE_CMEM == 1
#define FILTER_POINTER __constant float*
#else
#define FILTER_POINTER const __global float*
#endif

__kernel __attribute__((reqd_work_group_size(BLOCK_SIZE_X, BLOCK_SIZE_Y, 1)))
void convolution(__global float* output, INPUT_POINTER input, FILTER_POINTER filter) {
  const int tx = get_local_id(0);
  const int ty = get_local_id(1);
  const int x0 = get_group_id(0) * TILE_WIDTH;
  const int y0 = get_group_id(1) * TILE_HEIGHT;

  float sum[TILE_SIZE_Y][TILE_SIZE_X];
  for (int yi = 0; yi < TILE_SIZE_Y; ++yi) {
    for (int xi = 0; xi < TILE_SIZE_X; ++xi) {
      sum[yi][xi] = 0.0f;
    }
  }

#if USE_SHMEM == 1
  __local float tile[SH_HEIGHT * SH_STRIDE];
  for (int i = ty; i < SH_HEIGHT; i += BLOCK_SIZE_Y) {
    for (int j = tx; j < SH_WIDTH; j += BLOCK_SIZE_X) {
      const int y = y0 + i;
      const int x = x0 + j;
      tile[i * SH_STRIDE + j] =
          (y < INPUT_HEIGHT && x < INPUT_WIDTH) ? input[y * INPUT_WIDTH + x] : 0.0f;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int fi = 0; fi < FILTER_HEIGHT; ++fi) {
    for (int fj = 0; fj < FILTER_WIDTH; ++fj) {
      const float w = filter[fi * FILTER_WIDTH + fj];
      for (int yi = 0; yi < TILE_SIZE_Y; ++yi) {
        for (int xi = 0; xi < TILE_SIZE_X; ++xi) {
          sum[yi][xi] += tile[(ty + yi * BLOCK_SIZE_Y + fi) * SH_STRIDE + tx + xi * BLOCK_SIZE_X + fj] * w;
        }
      }
    }
  }
#else
  for (int fi = 0; fi < FILTER_HEIGHT; ++fi) {
    for (int fj = 0; fj < FILTER_WIDTH; ++fj) {
      const float w = filter[fi * FILTER_WIDTH + fj];
      for (int yi = 0; yi < TILE_SIZE_Y; ++yi) {
        const int y = y0 + ty + yi * BLOCK_SIZE_Y;
        for (int xi = 0; xi < TILE_SIZE_X; ++xi) {
          const int x = x0 + tx + xi * BLOCK_SIZE_X;
          if (y < IMAGE_HEIGHT && x < IMAGE_WIDTH) {
            sum[yi][xi] += input[(y + fi) * INPUT_WIDTH + x + fj] * w;
          }
        }
      }
    }
  }
#endif

  for (int yi = 0; yi < TILE_SIZE_Y; ++yi) {
    const int y = y0 + ty + yi * BLOCK_SIZE_Y;
    for (int xi = 0; xi < TILE_SIZE_X; ++xi) {
      const int x = x0 + tx + xi * BLOCK_SIZE_X;
      if (y < IMAGE_HEIGHT && x < IMAGE_WIDTH) {
        output[y * IMAGE_WIDTH + x] = sum[yi][xi];
      }
    }
  }
}
