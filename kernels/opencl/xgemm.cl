// Tiled single-precision GEMM whose tuning parameters mean what they mean in CLBlast's Xgemm
// (Nugteren, "CLBlast: a tuned OpenCL BLAS library", 2018), so that measurements of this kernel
// and of CLBlast on other GPUs share one search space.
//
// Computes C = alpha * A * B + beta * C with
//   A: M x K column-major (m contiguous):       a[k * M + m]
//   B: K x N row-major    (n contiguous):       b[k * N + n]
//   C: M x N column-major (m contiguous):       c[n * M + m]
// so that both inputs are read along their contiguous dimension with vectors of VWM / VWN.
// M, N and K must be multiples of MWG, NWG and KWG (the host pads).
//
// Parameters (all set with -D by the tuner; the defaults below only make the file compile alone):
//   MWG, NWG, KWG  tile of C computed by one work-group (M and N) and the K-slice per step
//   MDIMC, NDIMC   work-group shape while computing: each work-item owns MWI x NWI results
//   MDIMA, NDIMB   work-group reshaped to MDIMA x KDIMA (resp. NDIMB x KDIMB) to load A (B)
//   KWI            unroll factor of the inner K loop
//   VWM, VWN       vector width of loads/stores along M (A and C) and N (B)
//   STRM, STRN     0: a work-item's elements are contiguous; 1: strided by the group width
//   SA, SB         1: stage the A (B) tile in local memory, 0: read it straight from global
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

// Derived sizes; the space's constraints make every division exact.
#define MWI (MWG / MDIMC)               // results per work-item along M
#define NWI (NWG / NDIMC)               // results per work-item along N
#define KDIMA ((MDIMC * NDIMC) / MDIMA) // loader shape for A: MDIMA x KDIMA
#define KDIMB ((MDIMC * NDIMC) / NDIMB) // loader shape for B: NDIMB x KDIMB
#define MWA (MWG / MDIMA)               // A elements per loader along M
#define KWA (KWG / KDIMA)               // A elements per loader along K
#define NWB (NWG / NDIMB)               // B elements per loader along N
#define KWB (KWG / KDIMB)               // B elements per loader along K

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#if VWM == 1
typedef float realM;
#else
typedef CAT(float, VWM) realM;
#endif
#if VWN == 1
typedef float realN;
#define STORE_N(v, p) ((p)[0] = (v))
#else
typedef CAT(float, VWN) realN;
#define STORE_N(v, p) CAT(vstore, VWN)((v), 0, (p))
#endif

// Position (in vectors) of a work-item's i-th vector inside the work-group tile.
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

__kernel __attribute__((reqd_work_group_size(MDIMC, NDIMC, 1)))
void xgemm(const int size_m, const int size_n, const int size_k, const float alpha,
           const float beta, const __global realM* restrict agm,
           const __global realN* restrict bgm, __global realM* cgm) {
  const int lid_m = get_local_id(0);
  const int lid_n = get_local_id(1);
  const int tid = lid_m + MDIMC * lid_n;
  const int group_m = get_group_id(0) * (MWG / VWM);  // first vector of this tile along M
  const int group_n = get_group_id(1) * (NWG / VWN);  // first vector of this tile along N
  const int vectors_m = size_m / VWM;
  const int vectors_n = size_n / VWN;

#if SA == 1
  __local realM alm[KWG * (MWG / VWM)];
#endif
#if SB == 1
  __local realN blm[KWG * (NWG / VWN)];
#endif

  realM acc[NWI][MWI / VWM];
  for (int ni = 0; ni < NWI; ++ni) {
    for (int mi = 0; mi < MWI / VWM; ++mi) {
      acc[ni][mi] = (realM)0.0f;
    }
  }

  for (int kwg = 0; kwg < size_k; kwg += KWG) {
#if SA == 1
    // The work-group, reshaped to MDIMA x KDIMA, copies the KWG x MWG slice of A.
    {
      const int la_m = tid % MDIMA;
      const int la_k = tid / MDIMA;
      for (int mia = 0; mia < MWA / VWM; ++mia) {
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
      for (int kib = 0; kib < KWB; ++kib) {
        for (int nib = 0; nib < NWB / VWN; ++nib) {
          const int ng = N_INDEX(nib, lb_n, NWB / VWN, NDIMB);
          const int kg = kib + lb_k * KWB;
          blm[kg * (NWG / VWN) + ng] = bgm[(kwg + kg) * vectors_n + group_n + ng];
        }
      }
    }
#endif
#if SA == 1 || SB == 1
    barrier(CLK_LOCAL_MEM_FENCE);
#endif

    for (int pwi = 0; pwi < KWG; pwi += KWI) {
#pragma unroll
      for (int pit = 0; pit < KWI; ++pit) {
        const int k = pwi + pit;
        realM apm[MWI / VWM];
        float bpm[NWI];
        for (int mi = 0; mi < MWI / VWM; ++mi) {
          const int mg = M_INDEX(mi, lid_m, MWI / VWM, MDIMC);
#if SA == 1
          apm[mi] = alm[k * (MWG / VWM) + mg];
#else
          apm[mi] = agm[(kwg + k) * vectors_m + group_m + mg];
#endif
        }
        for (int ni = 0; ni < NWI / VWN; ++ni) {
          const int ng = N_INDEX(ni, lid_n, NWI / VWN, NDIMC);
#if SB == 1
          const realN bvec = blm[k * (NWG / VWN) + ng];
#else
          const realN bvec = bgm[(kwg + k) * vectors_n + group_n + ng];
#endif
          STORE_N(bvec, &bpm[ni * VWN]);
        }
        // acc[n][m] += a[m] * b[n] for this k, VWM rows at a time.
        for (int ni = 0; ni < NWI; ++ni) {
          for (int mi = 0; mi < MWI / VWM; ++mi) {
            acc[ni][mi] = mad(apm[mi], (realM)bpm[ni], acc[ni][mi]);
          }
        }
      }
    }
#if SA == 1 || SB == 1
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
  }

  // C = alpha * acc + beta * C; bpm slot (ni, j) holds column N_INDEX(ni) * VWN + j.
  for (int ni = 0; ni < NWI / VWN; ++ni) {
    for (int j = 0; j < VWN; ++j) {
      const int n = (group_n + N_INDEX(ni, lid_n, NWI / VWN, NDIMC)) * VWN + j;
      for (int mi = 0; mi < MWI / VWM; ++mi) {
        const int index = n * vectors_m + group_m + M_INDEX(mi, lid_m, MWI / VWM, MDIMC);
        cgm[index] = alpha * acc[ni * VWN + j][mi] + beta * cgm[index];
      }
    }
  }
}
