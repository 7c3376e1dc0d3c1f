// A hand-written fp16 matmul with shared-memory staging, for bench/cuda.py --sweep --experiments: not code zeptograd
// generates, a measured lead for its tensor-core plans. C (M x N, fp16) = A (M x K) @ B (K x N), both row-major as a
// user's tensors are, so no copies into fragment order: each stage of BK columns of A and rows of B goes to shared
// memory by cp.async (16 bytes a thread at a time, STAGES stages in flight), and a warp's fragments come from there by
// ldmatrix (.trans for B). A warp computes TM x TN mma.m16n8k16 blocks, a block WM x WN warps. The rows in shared
// memory are padded by 16 bytes so that ldmatrix's eight row reads hit distinct banks. The bench prepends the
// #defines below; M, N, K must be multiples of the block's tile.
#include <cuda_fp16.h>
struct zg_float4 { float v[4]; };
__device__ __forceinline__ void mma(const unsigned* a, const unsigned* b, zg_float4& c) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c.v[0]), "+f"(c.v[1]), "+f"(c.v[2]), "+f"(c.v[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#define TM 2
#define TN 8
#define BM (WM * TM * 16)
#define BN (WN * TN * 8)
#define AS (BK + 8)      /* A row stride in smem (halves): 48 bytes, ldmatrix conflict-free */
#define BS (BN + 8)      /* B row stride in smem: 16 bytes of padding a row */
#define THREADS (WM * WN * 32)
#define A_STAGE (BM * AS)
#define B_STAGE (BK * BS)
#define A_CHUNKS (BM * BK / 8)
#define CHUNKS (A_CHUNKS + BK * BN / 8)
#define PER ((CHUNKS + THREADS - 1) / THREADS)
extern "C" __global__ void __launch_bounds__(THREADS, MINB)
    smem_matmul(half* __restrict__ data0, const half* __restrict__ data1, const half* __restrict__ data2) {
  extern __shared__ __align__(16) half smem[];
  half* sa = smem;
  half* sb = smem + STAGES * A_STAGE;
  const int bn = blockIdx.x, bm = blockIdx.y;
  const int lane = threadIdx.x, wm = threadIdx.y, wn = threadIdx.z;
  const int tid = lane + 32 * (wm + WM * wn);
  const unsigned sa0 = (unsigned)__cvta_generic_to_shared(sa), sb0 = (unsigned)__cvta_generic_to_shared(sb);
  const half* src[PER]; unsigned dst[PER]; bool isb[PER]; bool on[PER];
  #pragma unroll
  for (int i = 0; i < PER; i++) {
    int c = tid + THREADS * i;
    on[i] = c < CHUNKS;
    if (c < A_CHUNKS) {  // A row r, chunk h of its BK columns
      int r = c / (BK / 8), h = c % (BK / 8);
      src[i] = data1 + (size_t)(bm * BM + r) * K + h * 8;
      dst[i] = sa0 + (r * AS + h * 8) * 2; isb[i] = false;
    } else {  // B row r (a k), chunk q of its BN columns
      int cc = c - A_CHUNKS, r = cc / (BN / 8), q = cc % (BN / 8);
      src[i] = data2 + (size_t)r * N + bn * BN + q * 8;
      dst[i] = sb0 + (r * BS + q * 8) * 2; isb[i] = true;
    }
  }
  auto issue = [&](int kb, int stage) {
    #pragma unroll
    for (int i = 0; i < PER; i++) {
      if (!on[i]) continue;
      unsigned d = dst[i] + stage * (isb[i] ? B_STAGE : A_STAGE) * 2;
      const half* g = src[i] + (isb[i] ? (size_t)kb * BK * N : (size_t)kb * BK);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(d), "l"(g));
    }
    asm volatile("cp.async.commit_group;\n" ::);
  };
  zg_float4 acc[TM][TN];
  #pragma unroll
  for (int i = 0; i < TM; i++)
    #pragma unroll
    for (int j = 0; j < TN; j++) for (int e = 0; e < 4; e++) acc[i][j].v[e] = 0.0f;
  #pragma unroll
  for (int s = 0; s < STAGES - 1; s++) issue(s, s);
  // ldmatrix row addresses: lane i gives row i % 8 of matrix i / 8
  const int q = lane / 8, r8 = lane % 8;
  const unsigned a_off = (((wm * TM) * 16 + r8 + 8 * (q % 2)) * AS + 8 * (q / 2)) * 2;
  const unsigned b_off = ((r8 + 8 * (q % 2)) * BS + (wn * TN) * 8 + 8 * (q / 2)) * 2;
  for (int kb = 0; kb < K / BK; kb++) {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
    __syncthreads();
    int nk = kb + STAGES - 1;
    if (nk < K / BK) issue(nk, nk % STAGES); else asm volatile("cp.async.commit_group;\n" ::);
    const int st = kb % STAGES;
    #pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
      unsigned a[TM][4], b[TN][2];
      #pragma unroll
      for (int i = 0; i < TM; i++) {
        unsigned addr = sa0 + st * A_STAGE * 2 + a_off + i * 16 * AS * 2 + kk * 32;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(a[i][0]), "=r"(a[i][1]), "=r"(a[i][2]), "=r"(a[i][3]) : "r"(addr));
      }
      #pragma unroll
      for (int j = 0; j < TN; j += 2) {
        unsigned addr = sb0 + st * B_STAGE * 2 + b_off + j * 8 * 2 + kk * 16 * BS * 2;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(b[j][0]), "=r"(b[j][1]), "=r"(b[j + 1][0]), "=r"(b[j + 1][1]) : "r"(addr));
      }
      #pragma unroll
      for (int i = 0; i < TM; i++)
        #pragma unroll
        for (int j = 0; j < TN; j++) mma(a[i], b[j], acc[i][j]);
    }
  }
  const int g = lane / 4, t = lane % 4;
  #pragma unroll
  for (int i = 0; i < TM; i++)
    #pragma unroll
    for (int j = 0; j < TN; j++) {
      int row = bm * BM + (wm * TM + i) * 16 + g, col = bn * BN + (wn * TN + j) * 8 + 2 * t;
      *reinterpret_cast<half2*>(&data0[(size_t)row * N + col]) = __floats2half2_rn(acc[i][j].v[0], acc[i][j].v[1]);
      *reinterpret_cast<half2*>(&data0[(size_t)(row + 8) * N + col]) = __floats2half2_rn(acc[i][j].v[2], acc[i][j].v[3]);
    }
}
