// CUDA twin of kernels/opencl/xgemm.cl: the same tiled SGEMM with CLBlast Xgemm's parameters
// and the same layouts, C = alpha * A * B + beta * C with
//   A: M x K column-major a[k * M + m], B: K x N row-major b[k * N + n], C: M x N column-major.
// M, N and K are multiples of MWG, NWG and KWG. Launch with blocks of MDIMC x NDIMC threads and a
// grid of (M / MWG) x (N / NWG) blocks. Compiled per configuration by NVRTC with -D defines;
// the defaults only make the file compile alone (nvcc checks it at build time).
#ifndef MWG
#define MWG 64
#endif
#ifndef NWG
#define NWG 64
#endif
#ifndef KWG
#define KWG 32
#endif
#ifndef MDIMC
#define MDIMC 16
#endif
#ifndef NDIMC
#define NDIMC 16
#endif
#ifndef MDIMA
#define MDIMA 16
#endif
#ifndef NDIMB
#define NDIMB 16
#endif
#ifndef KWI
#define KWI 2
#endif
#ifndef VWM
#define VWM 2
#endif
#ifndef VWN
#define VWN 2
#endif
#ifndef STRM
#define STRM 0
#endif
#ifndef STRN
#define STRN 0
#endif
#ifndef SA
#define SA 1
#endif
#ifndef SB
#define SB 1
#endif

#define MWI (MWG / MDIMC)
#define NWI (NWG / NDIMC)
#define KDIMA ((MDIMC * NDIMC) / MDIMA)
#define KDIMB ((MDIMC * NDIMC) / NDIMB)
#define MWA (MWG / MDIMA)
#define KWA (KWG / KDIMA)
#define NWB (NWG / NDIMB)
#define KWB (KWG / KDIMB)

// Vectors of VWM / VWN floats, aligned so that one load moves the whole vector.
struct __align__(sizeof(float) * VWM) RealM {
  float s[VWM];
};
struct __align__(sizeof(float) * VWN) RealN {
  float s[VWN];
};

#if STRM == 0
#define M_INDEX(i, id, per_item, group_width) ((i) + (id) * (per_item))
#else
#define M_INDEX(i, id, per_item, group_width) ((id) + (i) * (group_width))
#endif
#if STRN == 0
#define N_INDEX(i, id, per_item, group_width) ((i) + (id) * (per_item))
#else
#define N_INDEX(i, id, per_item, group_width) ((id) + (i) * (group_width))
#endif

extern "C" __global__ void __launch_bounds__(MDIMC* NDIMC)
    xgemm(const int size_m, const int size_n, const int size_k, const float alpha, const float beta,
          const RealM* __restrict__ agm, const RealN* __restrict__ bgm, RealM* cgm) {
  const int lid_m = threadIdx.x;
  const int lid_n = threadIdx.y;
  const int tid = lid_m + MDIMC * lid_n;
  const int group_m = blockIdx.x * (MWG / VWM);
  const int group_n = blockIdx.y * (NWG / VWN);
  const int vectors_m = size_m / VWM;
  const int vectors_n = size_n / VWN;

#if SA == 1
  __shared__ RealM alm[KWG * (MWG / VWM)];
#endif
#if SB == 1
  __shared__ RealN blm[KWG * (NWG / VWN)];
#endif

  float acc[NWI][MWI];  // acc[n][m]
#pragma unroll
  for (int ni = 0; ni < NWI; ++ni) {
#pragma unroll
    for (int m = 0; m < MWI; ++m) acc[ni][m] = 0.0f;
  }

  for (int kwg = 0; kwg < size_k; kwg += KWG) {
#if SA == 1
    {
      const int la_m = tid % MDIMA;
      const int la_k = tid / MDIMA;
#pragma unroll
      for (int mia = 0; mia < MWA / VWM; ++mia) {
#pragma unroll
        for (int kia = 0; kia < KWA; ++kia) {
          const int mg = M_INDEX(mia, la_m, MWA / VWM, MDIMA);
          const int kg = kia + la_k * KWA;
          alm[kg * (MWG / VWM) + mg] = agm[(kwg + kg) * vectors_m + group_m + mg];
        }
      }
    }
#endif
#if SB == 1
    {
      const int lb_n = tid % NDIMB;
      const int lb_k = tid / NDIMB;
#pragma unroll
      for (int kib = 0; kib < KWB; ++kib) {
#pragma unroll
        for (int nib = 0; nib < NWB / VWN; ++nib) {
          const int ng = N_INDEX(nib, lb_n, NWB / VWN, NDIMB);
          const int kg = kib + lb_k * KWB;
          blm[kg * (NWG / VWN) + ng] = bgm[(kwg + kg) * vectors_n + group_n + ng];
        }
      }
    }
#endif
#if SA == 1 || SB == 1
    __syncthreads();
#endif

    for (int pwi = 0; pwi < KWG; pwi += KWI) {
#pragma unroll
      for (int pit = 0; pit < KWI; ++pit) {
        const int k = pwi + pit;
        float apm[MWI];
        float bpm[NWI];
#pragma unroll
        for (int mi = 0; mi < MWI / VWM; ++mi) {
          const int mg = M_INDEX(mi, lid_m, MWI / VWM, MDIMC);
#if SA == 1
          const RealM a = alm[k * (MWG / VWM) + mg];
#else
          const RealM a = agm[(kwg + k) * vectors_m + group_m + mg];
#endif
#pragma unroll
          for (int v = 0; v < VWM; ++v) apm[mi * VWM + v] = a.s[v];
        }
#pragma unroll
        for (int ni = 0; ni < NWI / VWN; ++ni) {
          const int ng = N_INDEX(ni, lid_n, NWI / VWN, NDIMC);
#if SB == 1
          const RealN b = blm[k * (NWG / VWN) + ng];
#else
          const RealN b = bgm[(kwg + k) * vectors_n + group_n + ng];
#endif
#pragma unroll
          for (int v = 0; v < VWN; ++v) bpm[ni * VWN + v] = b.s[v];
        }
        // acc[n][m] += a[m] * b[n] for this k.
#pragma unroll
        for (int ni = 0; ni < NWI; ++ni) {
#pragma unroll
          for (int m = 0; m < MWI; ++m) acc[ni][m] = fmaf(apm[m], bpm[ni], acc[ni][m]);
        }
      }
    }
#if SA == 1 || SB == 1
    __syncthreads();
#endif
  }

#pragma unroll
  for (int ni = 0; ni < NWI / VWN; ++ni) {
#pragma unroll
    for (int j = 0; j < VWN; ++j) {
      const int n = (group_n + N_INDEX(ni, lid_n, NWI / VWN, NDIMC)) * VWN + j;
#pragma unroll
      for (int mi = 0; mi < MWI / VWM; ++mi) {
        const int index = n * vectors_m + group_m + M_INDEX(mi, lid_m, MWI / VWM, MDIMC);
        RealM c = cgm[index];
#pragma unroll
        for (int v = 0; v < VWM; ++v) {
          c.s[v] = alpha * acc[ni * VWN + j][mi * VWM + v] + beta * c.s[v];
        }
        cgm[index] = c;
      }
    }
  }
}
