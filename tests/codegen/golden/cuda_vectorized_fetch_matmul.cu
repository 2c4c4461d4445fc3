#include <stdint.h>

extern "C" __global__ void __launch_bounds__(64) main_kernel0(float* __restrict__ A, float* __restrict__ B, float* __restrict__ T_matmul_NN) {
  {
    const int32_t i_0 = (int32_t)blockIdx.x;
    {
      const int32_t j_0 = (int32_t)blockIdx.y;
      {
        __shared__ __align__(16) float B_shared[2048];
        {
          __shared__ __align__(16) float A_shared[2048];
          {
            const int32_t i_1 = (int32_t)threadIdx.y;
            {
              const int32_t j_1 = (int32_t)threadIdx.x;
              for (int32_t k_0 = 0; k_0 < 4; ++k_0) {
                for (int32_t ax0_ax1_fused_0 = 0; ax0_ax1_fused_0 < 2; ++ax0_ax1_fused_0) {
                  {
                    const int32_t ax0_ax1_fused_1 = (int32_t)threadIdx.y;
                    {
                      const int32_t ax0_ax1_fused_2 = (int32_t)threadIdx.x;
                      // ax0_ax1_fused_3: 4 lanes as one float4 access
                      *(float4*)(A_shared + ax0_ax1_fused_0 * 1024 + ax0_ax1_fused_1 * 128 + (ax0_ax1_fused_2 / 4) * 64 + k_0 * 16 + (ax0_ax1_fused_2 % 4) * 4) = *(float4*)(A + i_0 * 2048 + ax0_ax1_fused_0 * 1024 + ax0_ax1_fused_1 * 128 + (ax0_ax1_fused_2 / 4) * 64 + k_0 * 16 + (ax0_ax1_fused_2 % 4) * 4);
                    }
                  }
                }
                for (int32_t ax0_ax1_fused_0_1 = 0; ax0_ax1_fused_0_1 < 2; ++ax0_ax1_fused_0_1) {
                  {
                    const int32_t ax0_ax1_fused_1_1 = (int32_t)threadIdx.y;
                    {
                      const int32_t ax0_ax1_fused_2_1 = (int32_t)threadIdx.x;
                      // ax0_ax1_fused_3_1: 4 lanes as one float4 access
                      *(float4*)(B_shared + k_0 * 512 + ax0_ax1_fused_0_1 * 256 + ax0_ax1_fused_1_1 * 32 + ax0_ax1_fused_2_1 * 4) = *(float4*)(B + k_0 * 1024 + ax0_ax1_fused_0_1 * 512 + ax0_ax1_fused_1_1 * 64 + j_0 * 32 + ax0_ax1_fused_2_1 * 4);
                    }
                  }
                }
                __syncthreads();
                for (int32_t k_1 = 0; k_1 < 16; ++k_1) {
                  for (int32_t i_2 = 0; i_2 < 4; ++i_2) {
                    for (int32_t j_2 = 0; j_2 < 4; ++j_2) {
                      if (k_0 * 16 + k_1 == 0) {
                        T_matmul_NN[i_0 * 2048 + i_1 * 256 + i_2 * 64 + j_0 * 32 + j_1 * 4 + j_2] = 0.0f;
                      }
                      T_matmul_NN[i_0 * 2048 + i_1 * 256 + i_2 * 64 + j_0 * 32 + j_1 * 4 + j_2] = T_matmul_NN[i_0 * 2048 + i_1 * 256 + i_2 * 64 + j_0 * 32 + j_1 * 4 + j_2] + A_shared[i_1 * 256 + i_2 * 64 + k_0 * 16 + k_1] * B_shared[k_0 * 512 + k_1 * 32 + j_1 * 4 + j_2];
                    }
                  }
                }
                __syncthreads();
              }
            }
          }
        }
      }
    }
  }
}
