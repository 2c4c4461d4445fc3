#include <stdint.h>

extern "C" __global__ void __launch_bounds__(256) main_kernel0(float* __restrict__ A, float* __restrict__ B, float* __restrict__ T_matmul_NN) {
  {
    const int32_t i_0 = (int32_t)blockIdx.x;
    {
      const int32_t j_0 = (int32_t)blockIdx.y;
      for (int32_t k_0 = 0; k_0 < 4; ++k_0) {
        {
          __shared__ __align__(16) float A_shared[256];
          for (int32_t ax0_ax1_fused_0 = 0; ax0_ax1_fused_0 < 1; ++ax0_ax1_fused_0) {
            {
              const int32_t ax0_ax1_fused_1 = (int32_t)threadIdx.y;
              {
                const int32_t ax0_ax1_fused_2 = (int32_t)threadIdx.x;
                A_shared[ax0_ax1_fused_0 * 256 + ax0_ax1_fused_1 * 16 + ax0_ax1_fused_2] = A[i_0 * 1024 + ax0_ax1_fused_0 * 1024 + ax0_ax1_fused_1 * 64 + k_0 * 16 + ax0_ax1_fused_2];
              }
            }
          }
          {
            __shared__ __align__(16) float B_shared[256];
            for (int32_t ax0_ax1_fused_0_1 = 0; ax0_ax1_fused_0_1 < 1; ++ax0_ax1_fused_0_1) {
              {
                const int32_t ax0_ax1_fused_1_1 = (int32_t)threadIdx.y;
                {
                  const int32_t ax0_ax1_fused_2_1 = (int32_t)threadIdx.x;
                  B_shared[ax0_ax1_fused_0_1 * 256 + ax0_ax1_fused_1_1 * 16 + ax0_ax1_fused_2_1] = B[k_0 * 1024 + ax0_ax1_fused_0_1 * 1024 + ax0_ax1_fused_1_1 * 64 + j_0 * 16 + ax0_ax1_fused_2_1];
                }
              }
            }
            {
              const int32_t i_1 = (int32_t)threadIdx.y;
              {
                const int32_t j_1 = (int32_t)threadIdx.x;
                __syncthreads();
                for (int32_t k_1 = 0; k_1 < 16; ++k_1) {
                  if (k_0 * 16 + k_1 == 0) {
                    T_matmul_NN[i_0 * 1024 + i_1 * 64 + j_0 * 16 + j_1] = 0.0f;
                  }
                  T_matmul_NN[i_0 * 1024 + i_1 * 64 + j_0 * 16 + j_1] = T_matmul_NN[i_0 * 1024 + i_1 * 64 + j_0 * 16 + j_1] + A_shared[i_1 * 16 + k_1] * B_shared[k_1 * 16 + j_1];
                }
              }
            }
          }
        }
        __syncthreads();
      }
    }
  }
}
